/** A mistake on the command line: printed with the usage hint, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export const USAGE = `Usage: queen <command> [options]

Commands:
  dev                              start a broker (embedded PostgreSQL unless DATABASE_URL)
      [--port n] [--data-dir dir]
  migrate                          apply the SQL migrations to DATABASE_URL (or the embedded PostgreSQL) and exit
      [--data-dir dir]
  push <queue> [json]              push one message, or one per stdin line
      [--partition p] [--tx id]
  pop <queue>                      lease and print messages
      [--batch n] [--group g] [--partition p] [--wait] [--timeout ms] [--ack]
  tail <queue>                     long-poll forever, print and ack every message
      [--group g] [--from all|new] [--partition p] [--batch n]

Global options:
  --url <url>    broker URL (default $QUEEN_URL or http://localhost:6632); $QUEEN_TOKEN is sent as bearer token
  --json         JSON lines (the default when stdout is not a terminal); otherwise a table
  -h, --help     this text
`;
