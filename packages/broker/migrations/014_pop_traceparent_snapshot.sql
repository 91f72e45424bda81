-- A pop answers the traceparent of every message it claimed (issue 16's

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

