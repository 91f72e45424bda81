import { describe, expect, it } from 'vitest';
import { ackBatchBody, ackBody } from './ack.js';
import { configureBody, transactionBody } from './admin.js';
import { kvPutBody } from './kv.js';
import { absentNulls, nullableWhereOptional } from './null-as-absent.js';
import { buildOpenApi } from './openapi.js';
import { popQuery } from './pop.js';
import { pushBody } from './push.js';
import { allRoutes } from './routes.js';
import { cycleBody } from './streams.js';

const partitionId = '0190a0a0-0000-7000-8000-000000000001';

/** What the broker does: drop the absent-meaning nulls, then validate. */
function parse<T>(schema: { safeParse(v: unknown): { success: boolean; data?: T; error?: unknown } }, value: unknown, where: 'body' | 'query' = 'body') {
  const result = schema.safeParse(absentNulls(schema as never, where)(value));
  if (!result.success) throw new Error(JSON.stringify(result.error));
  return result.data as T;
}

describe('null as absent (PROTOCOL §1.1)', () => {
  it('an optional field given null reads as not given, a defaulted one gets its default', () => {
    const body = { transactionId: 't1', partitionId, leaseId: null, status: 'completed', error: null, consumerGroup: null };
    expect(ackBody.safeParse(body).success).toBe(false);
    expect(parse(ackBody, body)).toEqual({ transactionId: 't1', partitionId, status: 'completed', consumerGroup: '__QUEUE_MODE__' });
  });

  it('reaches nested items: batch acks, transaction operations (by their tag), push items', () => {
    expect(
      parse(ackBatchBody, { consumerGroup: null, acknowledgments: [{ transactionId: 't', partitionId, status: null, error: null }] }),
    ).toEqual({ consumerGroup: '__QUEUE_MODE__', acknowledgments: [{ transactionId: 't', partitionId, status: 'completed' }] });
    const txn = parse(transactionBody, {
      operations: [
        { type: 'push', items: [{ queue: 'q', partition: null, payload: null, transactionId: null, traceId: null }] },
        { type: 'ack', transactionId: 't', partitionId, consumerGroup: null, leaseId: null, error: null, status: null },
      ],
      requiredLeases: null,
      kv: null,
      timers: null,
    });
    expect(txn.operations).toEqual([
      { type: 'push', items: [{ queue: 'q', partition: 'Default', payload: null }] },
      { type: 'ack', transactionId: 't', partitionId, consumerGroup: '__QUEUE_MODE__', status: 'completed' },
    ]);
    expect(parse(pushBody, { items: [{ queue: 'q', payload: { keep: null }, traceId: null }] }).items[0]).toEqual({ queue: 'q', partition: 'Default', payload: { keep: null } });
  });

  it('leaves null where the field gives it a meaning: queue options, payloads, KV values, the cycle ack', () => {
    expect(parse(configureBody, { queue: 'q', namespace: null, task: null, options: { leaseTime: null } })).toEqual({ queue: 'q', namespace: null, task: null, options: { leaseTime: null } });
    expect(parse(configureBody, { queue: 'q', options: null })).toEqual({ queue: 'q' });
    expect(parse(kvPutBody, { value: null, ttlSeconds: null, expectedVersion: null })).toEqual({ value: null });
    const cycle = parse(cycleBody, { query_id: partitionId, partition_id: partitionId, ack: null, consumer_group: null, state_ops: null, push_items: null });
    expect(cycle).toMatchObject({ ack: null, consumer_group: '__QUEUE_MODE__', state_ops: [], push_items: [] });
  });

  it('a required field given null is still a 400, and the input is not mutated', () => {
    const body = { transactionId: null, partitionId, error: null };
    expect(ackBody.safeParse(absentNulls(ackBody, 'body')(body)).success).toBe(false);
    expect(body).toEqual({ transactionId: null, partitionId, error: null });
  });

  it('query strings: the text null is absent only where the field would reject it', () => {
    const q = popQuery();
    expect(parse(q, { batch: 'null', wait: 'null', subscriptionMode: 'null', subscriptionFrom: 'null' }, 'query')).toEqual({
      batch: 1,
      wait: false,
      timeout: 30000,
      consumerGroup: '__QUEUE_MODE__',
      autoAck: false,
      partitions: 1,
    });
    // "null" is a legal consumer group name: it stays one.
    expect(parse(q, { consumerGroup: 'null' }, 'query')).toMatchObject({ consumerGroup: 'null' });
    // An empty value is not null: still rejected.
    expect(q.safeParse(absentNulls(q, 'query')({ batch: '' })).success).toBe(false);
  });

  it('/openapi.json says optional body fields admit null, required ones do not', () => {
    const doc = buildOpenApi(allRoutes, { title: 't', version: '0' }) as any;
    const schema = doc.paths['/api/v1/ack'].post.requestBody.content['application/json'].schema;
    expect(schema.properties.error.anyOf).toContainEqual({ type: 'null' });
    expect(schema.properties.consumerGroup.anyOf).toContainEqual({ type: 'null' });
    expect(schema.properties.transactionId.anyOf).toBeUndefined();
    expect(nullableWhereOptional({ type: 'object', properties: { a: {} } })).toEqual({ type: 'object', properties: { a: {} } });
  });
});
