-- An ack of one partition moves its cursor with the single-row statements

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

