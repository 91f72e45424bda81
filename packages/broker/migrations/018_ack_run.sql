-- The ack a consumer sends after a pop, in one call without jsonb (issue 12).

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

