-- Delivery: pop under leases, acks, lease extension. Each is one function so
-- a request is one round trip; none of them writes a message row.

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

