import { useRef, useState } from 'preact/hooks';
import { call } from './api.js';
import { duration, ErrorBox, Json, Pager, preview, SearchBox, Section, time, usePoll } from './components.js';
import { QueueHistory } from './history.js';
import { href, navigate } from './router.js';

const PAGE = 100;
const REFRESH_MS = 5000;

interface Sample {
  at: number;
  pushed: number;
  delivered: number;
}

/** Messages per second between two reads of a monotonic counter; undefined before the second read. */
function rate(prev: Sample | undefined, now: Sample, key: 'pushed' | 'delivered'): string {
  if (!prev || now.at <= prev.at) return '…';
  const v = (now[key] - prev[key]) / ((now.at - prev.at) / 1000);
  return v < 0 ? '…' : v.toFixed(v < 10 ? 1 : 0);
}

export function QueuesPage() {
  // One page at a time, searched and paged by the broker: the console never
  // holds every queue of a broker with thousands.
  const [offset, setOffset] = useState(0);
  const [search, setSearch] = useState('');
  // The two latest reads per queue: rates are their difference (the broker keeps counters, not rates).
  const samples = useRef(new Map<string, [Sample | undefined, Sample]>());
  const { data, error } = usePoll(
    async () => {
      const page = await call('consoleQueues', { query: { limit: PAGE, offset, search } });
      const at = Date.parse(page.serverTime);
      for (const q of page.queues) {
        const last = samples.current.get(q.name)?.[1];
        samples.current.set(q.name, [last, { at, pushed: q.pushedTotal, delivered: q.deliveredTotal }]);
      }
      return page;
    },
    [offset, search],
    REFRESH_MS,
  );
  return (
    <>
      <h2>Queues</h2>
      <SearchBox
        placeholder="Search queues by name"
        onChange={(text) => {
          setSearch(text);
          setOffset(0);
        }}
      />
      <ErrorBox error={error} />
      {data ? (
        <>
          <table data-testid="queues">
            <thead>
              <tr>
                <th>Queue</th>
                <th class="num">Partitions</th>
                <th class="num">Depth</th>
                <th class="num">Retained</th>
                <th class="num">Push/s</th>
                <th class="num">Pop/s</th>
                <th class="num">Oldest unacked</th>
                <th class="num">DLQ</th>
                <th>Last activity</th>
              </tr>
            </thead>
            <tbody>
              {data.queues.map((q) => {
                const [prev, now] = samples.current.get(q.name) ?? [undefined, undefined];
                return (
                  <tr class="clickable" data-queue={q.name} onClick={() => navigate(href('queues', q.name))}>
                    <td>
                      <a href={href('queues', q.name)}>{q.name}</a>
                    </td>
                    <td class="num">{q.partitions}</td>
                    <td class="num" data-col="depth">
                      {q.depth}
                    </td>
                    <td class="num">{q.retained}</td>
                    <td class="num">{now ? rate(prev, now, 'pushed') : '…'}</td>
                    <td class="num">{now ? rate(prev, now, 'delivered') : '…'}</td>
                    <td class="num">{q.depth > 0 ? duration(q.oldestUnackedSeconds) : '—'}</td>
                    <td class="num" data-col="dlq">
                      {q.dlq > 0 ? <a href={href('dlq', { queue: q.name })}>{q.dlq}</a> : 0}
                    </td>
                    <td>{time(q.lastActivity)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          {data.queues.length === 0 ? <p class="muted">{search ? `No queue name contains “${search}”.` : 'No queues yet.'}</p> : null}
          <Pager offset={offset} limit={PAGE} shown={data.queues.length} total={data.total} onChange={setOffset} />
          <p class="muted">
            Depth and oldest unacked are measured at the queue-mode cursor. Push/s comes from the partitions' head offsets (every broker); pop/s from this
            broker's pops since it started. Both are averaged between refreshes ({REFRESH_MS / 1000} s).
          </p>
        </>
      ) : null}
    </>
  );
}

export function QueuePage({ name, query }: { name: string; query: URLSearchParams }) {
  const partition = query.get('partition') ?? undefined;
  const before = query.get('before') ?? undefined;
  const [open, setOpen] = useState<string | undefined>(undefined);
  const detail = usePoll(() => call('queueGet', { params: { queue: name }, query: { limit: 200 } }), [name], REFRESH_MS);
  const messages = usePoll(
    () => call('consoleMessages', { params: { queue: name }, query: { partition, before, limit: 50 } }),
    [name, partition, before],
    REFRESH_MS,
  );
  const page = messages.data;
  const shown = page?.messages.find((m) => m.id === open);
  return (
    <>
      <h2>
        <a href={href('queues')}>Queues</a> / {name}
      </h2>
      <ErrorBox error={detail.error} />
      <QueueHistory name={name} />
      {detail.data ? (
        <Section title={`Partitions (${detail.data.partitionCount})`}>
          <table data-testid="partitions">
            <thead>
              <tr>
                <th>Partition</th>
                <th class="num">First offset</th>
                <th class="num">Head offset</th>
                <th class="num">Segments</th>
                <th>Last activity</th>
              </tr>
            </thead>
            <tbody>
              {detail.data.partitions.map((p) => (
                <tr class="clickable" onClick={() => navigate(href('queues', name, { partition: p.name }))}>
                  <td>{p.name}</td>
                  <td class="num">{p.firstOffset}</td>
                  <td class="num">{p.headOffset}</td>
                  <td class="num">{p.segments}</td>
                  <td>{time(p.lastActivity)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <details>
            <summary class="muted">Options</summary>
            <Json value={detail.data.options} class="payload" />
          </details>
        </Section>
      ) : null}
      <Section title={page ? `Messages of partition ${page.partition} (newest first)` : 'Messages'}>
        <ErrorBox error={messages.error} />
        {page ? (
          <>
            <div class="toolbar">
              <label>
                Partition{' '}
                <select value={page.partition} onChange={(e) => navigate(href('queues', name, { partition: e.currentTarget.value }))}>
                  {page.partitions.map((p) => (
                    <option value={p}>{p}</option>
                  ))}
                </select>
              </label>
              <span class="muted">queue-mode cursor at {page.queueModeCursor}</span>
              <button disabled={!before} onClick={() => navigate(href('queues', name, { partition: page.partition }))}>
                Newest
              </button>
              <button disabled={!page.nextBefore} onClick={() => navigate(href('queues', name, { partition: page.partition, before: page.nextBefore ?? undefined }))}>
                Older
              </button>
            </div>
            <table data-testid="messages">
              <thead>
                <tr>
                  <th class="num">Offset</th>
                  <th>Transaction id</th>
                  <th>Created</th>
                  <th>Status</th>
                  <th>Payload</th>
                </tr>
              </thead>
              <tbody>
                {page.messages.map((m) => (
                  <tr class={`clickable${m.id === open ? ' selected' : ''}`} data-offset={m.offset} onClick={() => setOpen(m.id === open ? undefined : m.id)}>
                    <td class="num">{m.offset}</td>
                    <td>
                      <code>{m.transactionId}</code>
                    </td>
                    <td>{time(m.createdAt)}</td>
                    <td>{m.acked ? <span class="badge ok">acked</span> : <span class="badge">pending</span>}</td>
                    <td>
                      <code>{preview(m.data)}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            {page.messages.length === 0 ? <p class="muted">No retained messages.</p> : null}
            {shown ? (
              <div data-testid="payload">
                <h3>
                  Message {shown.offset} <span class="muted">{shown.id}</span>
                </h3>
                <Json value={shown.data} class="payload" />
                <p class="muted">
                  trace {shown.traceId ?? '—'} · producer {shown.producerSub ?? '—'}
                  {shown.encrypted ? ' · stored encrypted' : ''}
                </p>
              </div>
            ) : null}
          </>
        ) : null}
      </Section>
    </>
  );
}
