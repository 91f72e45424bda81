-- Safety (issue 13): the encryption key check, a byte bound on pops, a way
-- for the broker to hand back claimed messages it could not deliver, and
-- retention that keeps unread messages of every subscribed group and stream
-- query, run one partition (and a few segments) per transaction.

-- One row: the HMAC of a fixed text under QUEEN_ENCRYPTION_KEY, stored by the
-- first broker with a key. A broker whose key gives another value refuses to
-- start (encryption.ts checkEncryptionKey), so replicas never disagree on keys.
create table queen.encryption_key_check (
  id         boolean primary key default true check (id),
  kcv        text not null,
  created_at timestamptz not null default now()
);

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

