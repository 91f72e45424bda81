-- The ack route's one-move path, cheaper (issue 12). Measured on a batch of

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

