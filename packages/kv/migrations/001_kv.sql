-- The KV (PROTOCOL §6). Never called state: stream state is
-- queen_streams.state. Keys compare bytewise (collate "C"), so listing order
-- and `after` cursors do not depend on the database's locale.

create table queen.kv (
  namespace   text collate "C" not null,
  key         text collate "C" not null,
  value       jsonb not null,
  version     bigint not null,
  expires_at  timestamptz,
  updated_at  timestamptz not null default now(),
  primary key (namespace, key)
);
create index kv_expires_at on queen.kv (expires_at) where expires_at is not null;

-- Versions come from one sequence: they strictly increase on every write and
-- are never reused for a key, even across delete and re-create.
create sequence queen.kv_version_seq;

-- The functions this migration created or replaced are defined since issue 30
-- in packages/kv/src/sql/, one file each, applied after the migrations (migrate.ts).

