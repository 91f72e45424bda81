/** A mistake on the command line: printed with the usage hint, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export const USAGE = `Usage: queen <command> [options]

Local:
  dev                              start a broker (embedded PostgreSQL unless DATABASE_URL)
      [--port n] [--data-dir dir]
  migrate                          apply the SQL migrations to DATABASE_URL (or the embedded PostgreSQL) and exit
      [--data-dir dir]
  new worker <name>                scaffold apps/<name>: a stream worker with its main, test and build (exit 4 if it exists)
      [--root dir]

Messages:
  push <queue> [json]              push one message, or one per stdin line (progress on stderr)
      [--partition p] [--tx id]
  pop <queue>                      lease and print messages (acked only with --ack)
      [--batch n] [--group g] [--partition p] [--wait] [--timeout ms] [--ack]
  tail <queue>                     long-poll until Ctrl-C and print; a throw-away group of its own by default
      [--group g] [--from all|new] [--partition p] [--batch n] [--ack (required with --group __QUEUE_MODE__)]

Operations:
  status                           broker version, database, schema version (exit 5 when not ready)
  stats [queue]                    history: pushed, popped, acked, failed, dead-lettered, lag and DLQ size over time,
      [--range 1h|24h|30d]          with sparklines (every queue without one; --json: the history route's answer)
  queues list
  queues show <queue>              options and partitions
  queues configure <queue> option=value...   e.g. leaseTime=60 retryLimit=5 (JSON values; null resets)
  queues delete <queue> --yes
  groups list [--queue q]          lag and state per group and queue (each row that queue's own)
  groups show <group> [--queue q]  cursors and leases per partition
  groups seek <group> <queue>      --to-end | --timestamp ISO | --partition p [--offset n | --timestamp ISO | --to-end]
  dlq list [--queue q] [--group g] [--partition p] [--limit n] [--offset n]
  dlq requeue <id>... [--group g]  push again to the partition, remove the entries
      [--to-queue q] [--to-partition p]   into another queue instead
  dlq requeue --queue q|--group g|--partition p|--error text|--after ISO|--before ISO
      [--page n] [--to-queue q] [--to-partition p]   in bulk, page by page, with progress
  dlq delete <id>... [--group g]   remove the entries
  streams list
  streams state <query> [partition]  state rows (partition name or id; all source partitions, or a join's shards, if omitted); --bookkeeping adds the runner's own rows (__wm__, <tag>␟__closed__, __join__)
      [--prefix p] [--key k]... [--limit n]
  streams lag <query>                  catch-up progress per source partition: messages behind and their age (--json)
  streams plan <query>                 the last proposed version against the registered one, per stage (--json)
  streams drop <query> --yes
  kv get <namespace> <key>
  kv set <namespace> <key> <json>  [--ttl s] [--expected-version n]
  kv list <namespace>              [--prefix p] [--after key] [--limit n]
  kv delete <namespace> <key>      [--expected-version n]
  schedules list                   recurring schedules with their next fire time
  schedules add <name> <cron> <queue> [json]   create or replace (quote the cron): one message per fire time
      [--tz zone (default UTC)] [--partition p] [--missed skip|one|all (default one)]
  schedules delete <name>

Global options (anywhere on the line):
  --url <url>      broker URL (default $QUEEN_URL or http://localhost:6632)
  --token <token>  bearer token, API key or JWT (default $QUEEN_TOKEN)
  --json           JSON lines (the default when stdout is not a terminal); otherwise a table
  --version        print the version
  -h, --help       this text

Exit codes: 0 ok, 1 error (broker refused or unreachable), 2 usage, 3 not found, 4 conflict, 5 not ready.
`;
