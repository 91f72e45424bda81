-- The KV's failures by catalogue code only (issue 14): kv_apply_v1 as in

-- The functions this migration created or replaced are defined since issue 30
-- in packages/kv/src/sql/, one file each, applied after the migrations (migrate.ts).

