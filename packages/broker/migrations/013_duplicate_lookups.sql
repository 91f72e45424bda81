-- Duplicate lookups that stay index lookups (issue 12). A push's items

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

