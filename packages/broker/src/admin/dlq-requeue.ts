import { errorMessage, type DlqRequeueBody } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { encryptedQueues, encryptPayload, queueMaxSizes } from '../log/encryption.js';
import { tally } from '../metrics/metrics.js';

/**
 * The DLQ entries a requeue names, as a WHERE over `queen.dlq d` joined to
 * its partition `p` and message `m`: by message ids ($1) or by the bulk
 * filters, each narrowed to a consumer group ($2) when given.
 */
const MATCHING = `($1::uuid[] is null or m.id = any($1))
  and ($2::text is null or d.consumer_group = $2)
  and ($3::text is null or p.queue_name = $3)
  and ($4::text is null or p.name = $4)
  and ($5::text is null or strpos(lower(coalesce(d.error_message, '')), lower($5)) > 0)
  and ($6::timestamptz is null or d.failed_at >= $6)
  and ($7::timestamptz is null or d.failed_at < $7)`;

const FROM_ENTRIES = `queen.dlq d
  join queen.partitions p on p.id = d.partition_id
  join queen.messages m on m.partition_id = d.partition_id and m.msg_offset = d.msg_offset`;

/** A message with matching entries, before any lock: where it is, and its partition's name. */
interface Candidate {
  id: string;
  partitionId: string;
  offset: string;
  partition: string;
  /** The queue of its partition. */
  queue: string;
}

/** A candidate left in the DLQ because its destination queue had no room under its maxSize. */
interface Refused {
  queue: string;
  pending: number;
  maxSize: number;
}

/** A message whose entries this request deleted, with the count. */
interface Taken {
  id: string;
  entries: number;
}

interface Pushed {
  status: 'queued' | 'duplicate';
  message_id: string;
  offset: string;
}

/** Where a taken message goes: its own partition, or the target queue's partition. */
interface Destination {
  queue: string;
  partition: string;
  partitionId: string;
}

const refusedFull = (index: number, id: string, r: Refused) => ({
  index,
  id,
  success: false,
  code: 'QUEUE_FULL' as const,
  error: `${errorMessage('QUEUE_FULL', { ...r, count: 1 })}; its DLQ entries stay`,
  queue: r.queue,
  partition: null,
  partitionId: null,
  entriesDeleted: 0,
  messageId: null,
  offset: null,
  transactionId: null,
  status: null,
});

const notFound = (index: number, id: string) => ({
  index,
  id,
  success: false,
  code: 'MESSAGE_NOT_FOUND' as const,
  error: errorMessage('MESSAGE_NOT_FOUND'),
  queue: null,
  partition: null,
  partitionId: null,
  entriesDeleted: 0,
  messageId: null,
  offset: null,
  transactionId: null,
  status: null,
});

/**
 * POST /api/v1/dlq/requeue (extension). The messages of the named entries
 * (by id, or in bulk by filters: one page of at most `limit` messages, the
 * oldest failure first) are pushed again and their entries deleted, in one
 * transaction per request:
 *   1. the candidates are read without locks; a target queue's partitions
 *      are ensured (committed on their own, PROTOCOL §4);
 *   2. the append locks of every source and target partition, ascending
 *      (§4 rank 4): retention can then drop neither the messages nor their
 *      entries, and the allocator below takes no lock out of order;
 *   3. the matching entries of the candidates are deleted (of every group,
 *      or of `consumerGroup` only): an entry deleted meanwhile by another
 *      request is not ours, and its message is not pushed here;
 *   4. each message is pushed once through the allocator
 *      (queen.log_push_many_v1) to its own partition or the target's: a new
 *      id and offset at the head, the same payload (ciphertext as stored;
 *      a plaintext payload is encrypted here for an encryptionEnabled
 *      target) and traceId, transactionId `dlq:<id>`, producerSub = the
 *      caller. Every consumer group of that queue sees it.
 * A destination queue with a maxSize takes messages only into its room
 * (queen.log_queue_room_v1.sql, locked and counted before step 2, in
 * candidate order): a message that does not fit is not pushed, its entries
 * stay in the DLQ, and its result says QUEUE_FULL (`refused` counts them).
 * The transactionId makes a replay repeatable: a message replayed again
 * into the same partition (its other groups' entries, or after a crash
 * that kept an entry) while the first copy is retained answers `duplicate`
 * with that copy instead of queueing a second one. A second requeue of one
 * id finds no entry and answers MESSAGE_NOT_FOUND (requeued: 0).
 */
export function requeueDlq(ctx: BrokerContext, body: DlqRequeueBody, producerSub: string | null) {
  // A target partition deleted under the request (P0002) is re-created once, as a push does.
  return ctx.partitions.retrying(() => requeueOnce(ctx, body, producerSub));
}

async function requeueOnce(ctx: BrokerContext, body: DlqRequeueBody, producerSub: string | null) {
  const ids = body.ids?.map((id) => id.toLowerCase());
  const filter = [
    ids ?? null,
    body.consumerGroup ?? null,
    body.queue ?? null,
    body.partition ?? null,
    body.errorContains ?? null,
    body.failedAfter ?? null,
    body.failedBefore ?? null,
  ];
  const { rows: candidates } = await ctx.db.query<Candidate>(
    `select m.id::text as id, m.partition_id as "partitionId", m.msg_offset::text as offset, p.name as partition, p.queue_name as queue
       from ${FROM_ENTRIES}
      where ${MATCHING}
      group by m.id, m.partition_id, m.msg_offset, p.name, p.queue_name
      order by min(d.failed_at), min(d.id)
      limit $8`,
    [...filter, ids ? ids.length : body.limit],
  );
  if (ids) {
    const order = new Map(ids.map((id, i) => [id, i] as const));
    candidates.sort((a, b) => order.get(a.id)! - order.get(b.id)!);
  }

  const target = body.targetQueue;
  const destinations = new Map<string, Destination>();
  let encryptTarget = false;
  if (target !== undefined && candidates.length > 0) {
    const names = [...new Set(candidates.map((c) => body.targetPartition ?? c.partition))];
    const dir = await ctx.partitions.ensure(names.map((partition) => ({ queue: target, partition })));
    for (const c of candidates) {
      const partition = body.targetPartition ?? c.partition;
      destinations.set(c.id, { queue: target, partition, partitionId: ctx.partitions.idOf(dir, target, partition) });
    }
    encryptTarget = (await encryptedQueues(ctx, [target])).has(target);
  }

  const bounded = await queueMaxSizes(ctx, candidates.map((c) => target ?? c.queue));
  const refused = new Map<string, Refused>();
  const { taken, pushed, remaining, sources } = await ctx.db.transaction(async (client) => {
    const none = { taken: [] as Taken[], pushed: [] as Pushed[], sources: new Map<string, Destination>() };
    const count = async () =>
      ids ? undefined : Number((await client.query<{ n: string }>(`select count(*) as n from ${FROM_ENTRIES} where ${MATCHING}`, filter)).rows[0]!.n);
    refused.clear();
    if (bounded.size) {
      // Bounded destinations locked and counted before the append locks (PROTOCOL §4); room handed out in candidate order.
      const { rows } = await client.query<{ queue: string; max_size: string; pending: string }>('select * from queen.log_queue_room_v1($1::text[])', [[...bounded.keys()]]);
      const room = new Map(rows.map((r) => [r.queue, { left: Number(r.max_size) - Number(r.pending), maxSize: Number(r.max_size) }]));
      for (const c of candidates) {
        const r = room.get(target ?? c.queue);
        if (!r) continue;
        if (r.left > 0) r.left--;
        else refused.set(c.id, { queue: target ?? c.queue, pending: r.maxSize - r.left, maxSize: r.maxSize });
      }
    }
    const fits = candidates.filter((c) => !refused.has(c.id));
    if (!fits.length) return { ...none, remaining: await count() };
    const locked = [...new Set([...fits.map((c) => c.partitionId), ...[...destinations.values()].map((d) => d.partitionId)])];
    await client.query('select 1 from queen.partitions where id = any($1::uuid[]) order by id for update', [locked]);
    // The candidates' entries that still match, deleted; their messages, in candidate order.
    const { rows: deleted } = await client.query<Taken & { queue: string }>(
      `with del as (
         delete from queen.dlq d using queen.partitions p, queen.messages m
          where p.id = d.partition_id and m.partition_id = d.partition_id and m.msg_offset = d.msg_offset
            and m.id = any($8::uuid[]) and ${MATCHING}
         returning m.id, p.queue_name
       )
       select id::text as id, min(queue_name) as queue, count(*)::int as entries from del group by id`,
      [...filter, fits.map((c) => c.id)],
    );
    if (!deleted.length) return { ...none, remaining: await count() };
    const entries = new Map(deleted.map((t) => [t.id, t] as const));
    const moving = fits.filter((c) => entries.has(c.id));
    const sources = new Map(moving.map((c) => [c.id, { queue: entries.get(c.id)!.queue, partition: c.partition, partitionId: c.partitionId }] as const));
    const dest = (c: Candidate) => destinations.get(c.id) ?? sources.get(c.id)!;
    // Plaintext payloads going into an encryptionEnabled target are encrypted here (the key never reaches SQL).
    const ciphertexts: Record<string, string> = {};
    if (encryptTarget) {
      const { rows } = await client.query<{ id: string; payload: unknown }>(
        `select m.id::text as id, m.payload from queen.messages m
           join unnest($1::uuid[], $2::bigint[]) as u(pid, off) on m.partition_id = u.pid and m.msg_offset = u.off
          where m.encrypted is null`,
        [moving.map((c) => c.partitionId), moving.map((c) => c.offset)],
      );
      for (const r of rows) ciphertexts[r.id] = encryptPayload(ctx, r.payload);
    }
    const { rows: pushed } = await client.query<Pushed>(
      `select r.status, r.message_id, r."offset"::text as offset
         from queen.log_push_many_v1(
                (select jsonb_agg(jsonb_build_object('partition_id', u.target, 'trace_id', m.trace_id, 'transaction_id', 'dlq:' || m.id)
                                  || case when e.enc is null then jsonb_build_object('payload', m.payload) else jsonb_build_object('encrypted', e.enc) end
                                  order by u.ord)
                   from unnest($1::uuid[], $2::bigint[], $3::uuid[]) with ordinality as u(pid, off, target, ord)
                   join queen.messages m on m.partition_id = u.pid and m.msg_offset = u.off
                   cross join lateral (select coalesce($4::jsonb->>(m.id::text), encode(m.encrypted, 'base64')) as enc) e),
                $5) with ordinality as r(status, message_id, "offset", n)
        order by r.n`,
      [moving.map((c) => c.partitionId), moving.map((c) => c.offset), moving.map((c) => dest(c).partitionId), JSON.stringify(ciphertexts), producerSub],
    );
    return { taken: moving.map((c) => entries.get(c.id)!), pushed, sources, remaining: await count() };
  });

  const perQueue = new Map<string, number>();
  const moved = new Map<string, { entries: number; to: Destination; pushed: Pushed }>();
  const written: string[] = [];
  taken.forEach((t, i) => {
    const to = destinations.get(t.id) ?? sources.get(t.id)!;
    moved.set(t.id, { entries: t.entries, to, pushed: pushed[i]! });
    if (pushed[i]!.status === 'queued') tally(perQueue, to.queue);
    written.push(sources.get(t.id)!.partitionId, to.partitionId);
  });
  ctx.totals.touch(written);
  for (const [queue, n] of perQueue) {
    ctx.notifier.notify(queue);
    ctx.metrics.pushed.inc({ queue }, n);
    ctx.metrics.history.add(queue, '', 'pushed', n);
  }
  const seen = new Set<string>();
  const listed = ids ?? [...taken.map((t) => t.id), ...refused.keys()];
  const results = listed.map((id, index) => {
    const full = refused.get(id);
    if (full && !seen.has(id)) {
      seen.add(id);
      return refusedFull(index, id, full);
    }
    const m = moved.get(id);
    // A repeated id names the same entries: the first occurrence requeued them.
    if (!m || seen.has(id)) return notFound(index, id);
    seen.add(id);
    return {
      index,
      id,
      success: true,
      code: null,
      error: null,
      queue: m.to.queue,
      partition: m.to.partition,
      partitionId: m.to.partitionId,
      entriesDeleted: m.entries,
      messageId: m.pushed.message_id,
      offset: m.pushed.offset,
      transactionId: `dlq:${id}`,
      status: m.pushed.status,
    };
  });
  return { success: true as const, requeued: taken.length, refused: refused.size, results, ...(remaining !== undefined ? { remaining } : {}) };
}
