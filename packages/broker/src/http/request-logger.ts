import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/**
 * The logger fastify hands each request (`request.log`, `reply.log`), made
 * only when the request logs something. Fastify's default is a pino child
 * per request (the child, its formatters and its bindings as a chain of
 * concatenated strings). Nearly every request logs nothing (request
 * logging is off), and a parked long-poll pop keeps its request for up to
 * its whole timeout: with thousands parked, as many loggers that never
 * log. What a request does log carries the
 * same bindings (its reqId) as before.
 */
class RequestLogger {
  private made: FastifyBaseLogger | undefined;
  /** Fastify's options for the child: none (an empty object, not kept) unless a route sets a level or serializers. */
  private readonly options: ChildLoggerOptions | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    options: ChildLoggerOptions,
  ) {
    this.options = options.level === undefined && options.serializers === undefined ? undefined : options;
  }

  /** The pino child fastify would have made, made now. */
  private get logger(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }

  get level(): string {
    return this.made?.level ?? this.options?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.logger.level = level;
  }

  fatal(...args: unknown[]): void {
    this.log('fatal', args);
  }

  error(...args: unknown[]): void {
    this.log('error', args);
  }

  warn(...args: unknown[]): void {
    this.log('warn', args);
  }

  info(...args: unknown[]): void {
    this.log('info', args);
  }

  debug(...args: unknown[]): void {
    this.log('debug', args);
  }

  trace(...args: unknown[]): void {
    this.log('trace', args);
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options);
  }

  private log(level: Level, args: unknown[]): void {
    (this.logger[level] as (...a: unknown[]) => void)(...args);
  }
}

/** For fastify's `childLoggerFactory` option. */
export function requestLogger(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new RequestLogger(parent, bindings, options) as unknown as FastifyBaseLogger;
}
