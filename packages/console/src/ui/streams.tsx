import type { AccessLevel, StreamCounters } from '@queen-mq/protocol';
import { useState } from 'preact/hooks';
import { call, can } from './api.js';
import { confirmed, duration, ErrorBox, Json, preview, Section, time, usePoll, Watermark } from './components.js';
import { StreamHistory } from './history.js';
import { JoinBuffers } from './joins.js';
import { href, navigate } from './router.js';

/** Open windows refresh this often: they change with every cycle. */
const WINDOWS_REFRESH_MS = 3000;

type Counter = StreamCounters['queries'][number];

export function StreamsPage() {
  const { data, error } = usePoll(
    async () => {
      const [list, counters] = await Promise.all([
        call('streamsList', { query: { limit: 1000 } }),
        call('streamsCounters'),
      ]);
      return { list, counters: new Map(counters.queries.map((c) => [c.query_id, c])), since: counters.since };
    },
    [],
    5000,
  );
  return (
    <>
      <h2>Streams</h2>
      <ErrorBox error={error} />
      {data ? (
        <>
          <table data-testid="streams">
            <thead>
              <tr>
                <th>Query</th>
                <th>Source</th>
                <th>Sink</th>
                <th class="num">State rows</th>
                <th class="num">Cycles</th>
                <th class="num">Flushes</th>
                <th class="num">Emitted</th>
                <th class="num" title="Sink pushes answered duplicate: a replay, or a window emitted twice (the runner reports WINDOW_REEMITTED)">Duplicates</th>
                <th class="num">Errors</th>
                <th>Last cycle</th>
              </tr>
            </thead>
            <tbody>
              {data.list.queries.map((q) => {
                const c: Partial<Counter> = data.counters.get(q.query_id) ?? {};
                return (
                  <tr class="clickable" data-query={q.name} onClick={() => navigate(href('streams', q.name))}>
                    <td>
                      <a href={href('streams', q.name)}>{q.name}</a>
                    </td>
                    <td>{q.source_queue}</td>
                    <td>{q.sink_queue ?? '—'}</td>
                    <td class="num">{q.state_rows}</td>
                    <td class="num" data-col="cycles">
                      {c.cycles ?? 0}
                    </td>
                    <td class="num">{c.flushes ?? 0}</td>
                    <td class="num">{c.emitted ?? 0}</td>
                    <td class="num">{c.duplicates ?? 0}</td>
                    <td class="num" data-col="errors">
                      {c.errors ? <span class="badge bad" title={`last: ${c.last_error_code} at ${time(c.last_error_at)}`}>{c.errors}</span> : 0}
                    </td>
                    <td>{time(c.last_cycle_at)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          {data.list.queries.length === 0 ? <p class="muted">No stream query registered.</p> : null}
          <p class="muted">Counters are this broker's since {time(data.since)}: another replica counts the cycles it answered.</p>
        </>
      ) : null}
    </>
  );
}

function bounds(start: number | null, end: number): string {
  const e = new Date(end).toISOString();
  return start === null ? `… → ${e}` : `${new Date(start).toISOString()} → ${e}`;
}

export function StreamPage({ name, level }: { name: string; level: AccessLevel }) {
  const [partition, setPartition] = useState<string | undefined>();
  const [open, setOpen] = useState<string | undefined>();
  const [actionError, setActionError] = useState<Error | undefined>();
  const parts = usePoll(() => call('streamsPartitions', { params: { name }, query: { limit: 1000 } }), [name], 5000);
  const windows = usePoll(
    () => call('streamsWindows', { params: { name }, query: { partition, limit: 200 } }),
    [name, partition],
    WINDOWS_REFRESH_MS,
  );
  const drop = async () => {
    if (!confirmed(`Drop stream query ${name} and delete all its state rows?`)) return;
    try {
      await call('streamsDrop', { body: { name } });
      navigate(href('streams'));
    } catch (err) {
      setActionError(err as Error);
    }
  };
  const w = windows.data;
  const shown = w?.windows.find((x) => `${x.partition_id}/${x.key}` === open);
  return (
    <>
      <h2>
        <a href={href('streams')}>Streams</a> / {name}
      </h2>
      <ErrorBox error={parts.error} />
      <ErrorBox error={actionError} />
      <StreamHistory name={name} />
      {parts.data ? (
        <Section title={`Source partitions of ${parts.data.source_queue} (group ${parts.data.consumer_group})`}>
          <table data-testid="stream-partitions">
            <thead>
              <tr>
                <th>Partition</th>
                <th class="num">Cursor</th>
                <th class="num">Head</th>
                <th class="num">Lag</th>
                <th class="num">Lag (time)</th>
                <th>Leased</th>
                <th class="num">State rows</th>
                <th class="num">Open windows</th>
                <th>Watermark</th>
              </tr>
            </thead>
            <tbody>
              {parts.data.partitions.map((p) => (
                <tr
                  class={`clickable${partition === p.partition ? ' selected' : ''}`}
                  data-partition={p.partition}
                  onClick={() => setPartition(partition === p.partition ? undefined : p.partition)}
                >
                  <td>{p.partition}</td>
                  <td class="num" data-col="cursor">
                    {p.cursor}
                  </td>
                  <td class="num">{p.head_offset}</td>
                  <td class="num" data-col="lag">
                    {p.lag}
                  </td>
                  <td class="num">{p.lag > 0 ? duration(p.time_lag) : '—'}</td>
                  <td>{p.leased ? 'yes' : '—'}</td>
                  <td class="num">{p.state_rows}</td>
                  <td class="num">{p.open_windows}</td>
                  <td data-col="watermark" data-ms={p.watermark ?? ''}>
                    <Watermark ms={p.watermark} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Section>
      ) : null}
      <JoinBuffers name={name} partition={partition} />
      <Section title={`Open windows${partition ? ` of partition ${partition}` : ''} (refreshing every ${WINDOWS_REFRESH_MS / 1000} s)`}>
        <ErrorBox error={windows.error} />
        {w ? (
          <>
            <table data-testid="windows">
              <thead>
                <tr>
                  <th>Partition</th>
                  <th>Key</th>
                  <th>Window</th>
                  <th>Aggregate</th>
                  <th>Ripeness</th>
                  <th>Updated</th>
                </tr>
              </thead>
              <tbody>
                {w.windows.map((x) => (
                  <tr class="clickable" data-key={x.window_key} onClick={() => setOpen(open === `${x.partition_id}/${x.key}` ? undefined : `${x.partition_id}/${x.key}`)}>
                    <td>{x.partition ?? x.partition_id}</td>
                    <td>
                      <code>{x.window_key}</code>
                    </td>
                    <td>
                      <code>{bounds(x.window_start, x.window_end)}</code>
                    </td>
                    <td data-col="aggregate">
                      <code>{preview(x.value, 60)}</code>
                    </td>
                    <td data-col="ripeness">
                      {x.ripe ? <span class="badge warn">ripe: closes on the next cycle or flush</span> : <span class="badge">open, ends in {duration((x.window_end - w.now) / 1000)}</span>}
                    </td>
                    <td>{time(x.updated_at)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <p class="muted">
              {w.total > w.windows.length ? `${w.windows.length} of ${w.total} open windows, soonest end first. ` : `${w.total} open window(s). `}
              Ripeness is judged by the broker's clock against the window's end; the runner also waits out its grace period.
            </p>
            {shown ? (
              <div data-testid="window-value">
                <h3>
                  <code>{shown.key.replace(/\u001f/g, ' ␟ ')}</code> <span class="muted">version {shown.version}</span>
                </h3>
                <Json value={shown.value} class="payload" />
              </div>
            ) : null}
          </>
        ) : null}
      </Section>
      {can(level, 'streamsDrop') ? (
        <Section title="Danger zone">
          <button class="danger" onClick={drop}>
            Drop this query and its state
          </button>
        </Section>
      ) : null}
    </>
  );
}
