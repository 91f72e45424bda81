import { describe, expect, it } from 'vitest';
import { Queen, Stream, cron, gate, queueSink, session, sliding, slidingWindowLimit, tokenBucket, tumbling } from './index.js';

// Issue 14 item 6: every option object is validated at the call that takes
// it; a misspelt option throws VALIDATION_FAILED naming it and the accepted ones.

const src = { name: 'src' };
const sink = { name: 'sink' };

function failure(f: () => unknown): { code?: string; message: string } {
  try {
    f();
  } catch (err) {
    return err as { code?: string; message: string };
  }
  throw new Error('did not throw');
}

describe('options validated where they enter', () => {
  it('window sugar: a misspelt option throws at the builder call, naming it and the accepted ones', () => {
    const e = failure(() => Stream.from(src).windowTumbling({ seconds: 60, idleFlushMS: 1000 } as any));
    expect(e.code).toBe('VALIDATION_FAILED');
    expect(e.message).toBe(
      'tumbling window: unknown option "idleFlushMS" (did you mean "idleFlushMs"?); accepted: idleFlushMs, gracePeriod, allowedLateness, onLate, idleTimeoutMs, eventTime, seconds',
    );
    expect(() => Stream.from(src).windowSliding({ size: 60, slide: 10, grace: 5 } as any)).toThrow(/sliding window: unknown option "grace"; accepted: .*gracePeriod.*size, slide/);
    expect(() => Stream.from(src).windowSession({ gap: 30, eventtime: () => 0 } as any)).toThrow(/session window: unknown option "eventtime" \(did you mean "eventTime"\?\)/);
    expect(() => Stream.from(src).windowCron({ every: 'minute', onlate: 'drop' } as any)).toThrow(/unknown option "onlate"/);
    // the right spelling builds, and the option takes effect
    const c = Stream.from(src).windowTumbling({ seconds: 60, idleFlushMs: 1000 }).aggregate({ count: () => 1 }).to(sink).compile();
    expect(c.window!.options.idleFlushMs).toBe(1000);
  });

  it('window factories and the generic .window(): their own options only', () => {
    expect(() => tumbling({ secs: 60 } as any)).toThrow(/tumbling window: unknown option "secs"/);
    expect(() => sliding({ size: 60, slide: 10, hop: 5 } as any)).toThrow(/unknown option "hop"/);
    expect(() => session({ gap: 1, gapMs: 1000 } as any)).toThrow(/unknown option "gapMs" \(did you mean "gap"\?\)/);
    expect(() => cron({ every: 'hour', evry: 'day' } as any)).toThrow(/unknown option "evry"/);
    expect(() => Stream.from(src).window(tumbling({ seconds: 60 }), { idleFlushMS: 10 } as any)).toThrow(
      /the tumbling window: unknown option "idleFlushMS" \(did you mean "idleFlushMs"\?\); accepted: idleFlushMs, gracePeriod, allowedLateness, onLate, idleTimeoutMs, eventTime$/,
    );
    expect(() => Stream.from(src).window(tumbling({ seconds: 60 }), { idleFlushMs: '10' } as any)).toThrow(/idleFlushMs must be a non-negative number, got "10"/);
  });

  it('a common window option given to a factory, or a factory option given to .window(), throws saying where it goes', () => {
    // tumbling({ seconds, idleFlushMs }) used to build and drop idleFlushMs: the window flushed at the default
    const e = failure(() => Stream.from(src).window(tumbling({ seconds: 60, idleFlushMs: 1000 } as any)));
    expect(e.code).toBe('VALIDATION_FAILED');
    expect(e.message).toBe('tumbling window: "idleFlushMs" is an option of the window call, not of the plugin: .window(plugin, { idleFlushMs }); accepted here: seconds');
    expect(() => sliding({ size: 60, slide: 10, gracePeriod: 5 } as any)).toThrow(/sliding window: "gracePeriod" is an option of the window call/);
    expect(() => session({ gap: 30, eventTime: () => 0 } as any)).toThrow(/session window: "eventTime" is an option of the window call/);
    expect(() => cron({ every: 'hour', onLate: 'include' } as any)).toThrow(/cron window: "onLate" is an option of the window call/);
    // a misspelling of a common option given to a factory: the guess says where it goes
    expect(() => tumbling({ seconds: 60, idleFlushMS: 1000 } as any)).toThrow(
      'tumbling window: unknown option "idleFlushMS" (did you mean "idleFlushMs"? it is an option of the window call, not of the plugin: .window(plugin, { idleFlushMs })); accepted: seconds',
    );
    // the other way round: the plugin's own option given to .window()
    expect(() => Stream.from(src).window(tumbling({ seconds: 60 }), { seconds: 60 } as any)).toThrow(
      /the tumbling window: "seconds" is an option of the tumbling plugin, not of \.window\(\): pass it to the plugin's factory; accepted here: idleFlushMs, gracePeriod/,
    );
    expect(() => Stream.from(src).window(sliding({ size: 60, slide: 10 }), { slid: 5 } as any)).toThrow(/unknown option "slid" \(did you mean "slide"\? it is an option of the sliding plugin/);
    // placed right, each half takes effect: the generic form and the sugar compile to the same window
    const generic = Stream.from(src).window(tumbling({ seconds: 60 }), { idleFlushMs: 1000, gracePeriod: 2 }).aggregate({ count: () => 1 }).to(sink).compile();
    const sugar = Stream.from(src).windowTumbling({ seconds: 60, idleFlushMs: 1000, gracePeriod: 2 }).aggregate({ count: () => 1 }).to(sink).compile();
    expect(generic.window!.options).toMatchObject({ idleFlushMs: 1000, gracePeriodMs: 2000 });
    expect(sugar.window!.options).toEqual(generic.window!.options);
    expect(sugar.configHash).toBe(generic.configHash);
    const cronSugar = Stream.from(src).windowCron({ expression: '0 9 * * *', timeZone: 'Europe/Berlin', idleFlushMs: 7 }).aggregate({ count: () => 1 }).to(sink).compile();
    expect(cronSugar.window!.options.idleFlushMs).toBe(7);
    expect(cronSugar.window!.plugin.shape).toEqual({ expression: '0 9 * * *', timeZone: 'Europe/Berlin' });
  });

  it('sinks and gate helpers', () => {
    expect(() => Stream.from(src).to(sink, { partiton: 'p' } as any)).toThrow(/\.to\(\): unknown option "partiton" \(did you mean "partition"\?\); accepted: partition/);
    expect(() => queueSink('q', { partition: 5 } as any)).toThrow(/partition must be a non-empty string or a function of the value, got 5/);
    expect(() => tokenBucket({ capacity: 5, refilPerSecond: 1 } as any)).toThrow(/tokenBucket: unknown option "refilPerSecond" \(did you mean "refillPerSecond"\?\)/);
    expect(() => slidingWindowLimit({ limit: 5, windowSeconds: 1, maxWait: 0 } as any)).toThrow(/unknown option "maxWait" \(did you mean "maxWaitMs"\?\)/);
    expect(() => Stream.from(src).gate(tokenBucket({ capacity: 5, refillPerSecond: 1, maxWaitMs: 0 }))).not.toThrow();
    expect(() => gate(5 as any)).toThrow(/requires a function/);
  });

  it('run(): a misspelt or mistyped option rejects before any request', async () => {
    const chain = Stream.from(src).map((x) => x).to(sink);
    // Port 9 (discard) has no broker: a request would fail differently, and much later.
    await expect(chain.run({ queryId: 'q', url: 'http://127.0.0.1:9', batchsize: 10 } as any)).rejects.toThrow(
      /run\(\): unknown option "batchsize" \(did you mean "batchSize"\?\); accepted: queryId, url, bearerToken, batchSize/,
    );
    await expect(chain.run({ queryId: 'q', url: 'http://127.0.0.1:9', batchSize: 0 })).rejects.toThrow(/run\(\): batchSize must be an integer in 1..10000, got 0/);
    await expect(chain.run({ url: 'http://127.0.0.1:9' } as any)).rejects.toThrow(/run\(\): queryId is required/);
    await expect(chain.run({ queryId: 'q', url: 'http://127.0.0.1:9', logger: {} as any })).rejects.toThrow(/logger must have a warn\(message\) method/);
  });

  it('client: the constructor and consume() options', async () => {
    expect(() => new Queen({ url: 'http://127.0.0.1:9', retrys: 2 } as any)).toThrow(/new Queen\(\): unknown option "retrys" \(did you mean "retries"\?\)/);
    expect(() => new Queen({} as any)).toThrow(/new Queen\(\): url is required: the broker base URL/);
    expect(() => new Queen({ url: 'http://127.0.0.1:9', timeoutMs: -5 })).toThrow(/timeoutMs must be a positive number, got -5/);
    const queen = new Queen({ url: 'http://127.0.0.1:9' });
    try {
      expect(() => queen.queue('q').consume(() => undefined, { concurency: 2 } as any)).toThrow(/consume\(\): unknown option "concurency" \(did you mean "concurrency"\?\)/);
      expect(() => queen.queue('q').consume(() => undefined, { concurrency: 0 })).toThrow(/concurrency must be a positive integer, got 0/);
    } finally {
      await queen.close();
    }
  });
});
