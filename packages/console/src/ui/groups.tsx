import type { AccessLevel } from '@queen-mq/protocol';
import { useState } from 'preact/hooks';
import { call, can } from './api.js';
import { confirmed, duration, ErrorBox, Pager, SearchBox, Section, time, usePoll } from './components.js';
import { href, navigate } from './router.js';

const REFRESH_MS = 5000;
const PAGE = 100;
const DETAIL_ROWS = 1000;

const stateBadge = { Stable: 'ok', Lagging: 'warn', Dead: 'bad' } as const;

export function GroupsPage() {
  // A page of groups searched and paged by the broker; one row past the page says whether there is a next.
  const [offset, setOffset] = useState(0);
  const [search, setSearch] = useState('');
  const { data: rows, error } = usePoll(() => call('groupList', { query: { limit: PAGE + 1, offset, search } }), [offset, search], REFRESH_MS);
  const data = rows?.slice(0, PAGE);
  return (
    <>
      <h2>Consumer groups</h2>
      <SearchBox
        placeholder="Search groups by name"
        onChange={(text) => {
          setSearch(text);
          setOffset(0);
        }}
      />
      <ErrorBox error={error} />
      {data ? (
        <table data-testid="groups">
          <thead>
            <tr>
              <th>Group</th>
              <th>Queues (state of each)</th>
              <th class="num">Members</th>
              <th class="num">Lag (messages)</th>
              <th class="num">Partitions lagging</th>
              <th class="num">Lag (time)</th>
              <th>Group state</th>
            </tr>
          </thead>
          <tbody>
            {data.map((g) => (
              <tr class="clickable" data-group={g.name} onClick={() => navigate(href('groups', g.name))}>
                <td>
                  <a href={href('groups', g.name)}>{g.name}</a>
                </td>
                <td data-col="queues">
                  {/* Each queue with its own state; the group's, over all of them, is the last column. */}
                  {g.queues.map((q, i) => (
                    <span data-queue={q.queue}>
                      {i > 0 ? ', ' : ''}
                      {q.queue} <span class={`badge ${stateBadge[q.state]}`}>{q.state}</span>
                    </span>
                  ))}
                </td>
                <td class="num">{g.members}</td>
                <td class="num" data-col="lag">
                  {g.totalLag}
                </td>
                <td class="num">{g.partitionsWithLag}</td>
                <td class="num">{duration(g.maxTimeLag)}</td>
                <td>
                  <span class={`badge ${stateBadge[g.state]}`}>{g.state}</span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {data?.length === 0 ? <p class="muted">{search ? `No group name contains “${search}”.` : 'No consumer groups yet: a group appears with its first pop.'}</p> : null}
      {data ? <Pager offset={offset} limit={PAGE} shown={data.length} more={rows!.length > PAGE} onChange={setOffset} /> : null}
    </>
  );
}

export function GroupPage({ name, level }: { name: string; level: AccessLevel }) {
  // At most DETAIL_ROWS partitions: a group may read tens of thousands.
  const { data, error, reload } = usePoll(() => call('groupGet', { params: { group: name }, query: { limit: DETAIL_ROWS } }), [name], REFRESH_MS);
  const [notice, setNotice] = useState<string | undefined>();
  const [actionError, setActionError] = useState<Error | undefined>();
  const [when, setWhen] = useState<Record<string, string>>({});
  const [offsets, setOffsets] = useState<Record<string, string>>({});
  const act = async (what: string, run: () => Promise<unknown>) => {
    if (!confirmed(`${what}?`)) return;
    setNotice(undefined);
    setActionError(undefined);
    try {
      await run();
      setNotice(`${what}: done`);
      reload();
    } catch (err) {
      setActionError(err as Error);
    }
  };
  const queues = [...new Set(data?.partitions.map((p) => p.queue) ?? [])];
  const mayQueueSeek = can(level, 'seekQueue');
  const mayPartitionSeek = can(level, 'seekPartition');
  return (
    <>
      <h2>
        <a href={href('groups')}>Consumer groups</a> / {name}
      </h2>
      <ErrorBox error={error} />
      <ErrorBox error={actionError} />
      {notice ? <div class="notice">{notice}</div> : null}
      {data ? (
        <>
          <Section title={data.partitions.length === DETAIL_ROWS ? `Partitions (the first ${DETAIL_ROWS} by queue and name)` : 'Partitions'}>
            <table data-testid="group-partitions">
              <thead>
                <tr>
                  <th>Queue</th>
                  <th>Partition</th>
                  <th class="num">Cursor</th>
                  <th class="num">Head</th>
                  <th class="num">Lag</th>
                  <th class="num">Lag (time)</th>
                  <th>Lease</th>
                  <th>Last consumed</th>
                  {mayPartitionSeek ? <th>Seek to offset</th> : null}
                </tr>
              </thead>
              <tbody>
                {data.partitions.map((p) => (
                  <tr data-partition={`${p.queue}/${p.partition}`}>
                    <td>
                      <a href={href('queues', p.queue, { partition: p.partition })}>{p.queue}</a>
                    </td>
                    <td>{p.partition}</td>
                    <td class="num">{p.cursor}</td>
                    <td class="num">{p.headOffset}</td>
                    <td class="num" data-col="lag">
                      {p.lag}
                    </td>
                    <td class="num">{p.lag > 0 ? duration(p.timeLag) : '—'}</td>
                    <td>{p.leased ? `until ${time(p.leaseExpiresAt)}` : '—'}</td>
                    <td>{time(p.lastConsumedAt)}</td>
                    {mayPartitionSeek ? (
                      <td>
                        <input
                          size={8}
                          placeholder="offset"
                          value={offsets[p.partitionId] ?? ''}
                          onInput={(e) => setOffsets({ ...offsets, [p.partitionId]: e.currentTarget.value })}
                        />{' '}
                        <button
                          disabled={!offsets[p.partitionId]}
                          onClick={() =>
                            act(`Move ${name} on ${p.queue}/${p.partition} to offset ${offsets[p.partitionId]}`, () =>
                              call('seekPartition', { params: { group: name, queue: p.queue, partition: p.partition }, body: { offset: offsets[p.partitionId] } }),
                            )
                          }
                        >
                          Seek
                        </button>
                      </td>
                    ) : null}
                  </tr>
                ))}
              </tbody>
            </table>
          </Section>
          <Section title="Subscriptions">
            <table data-testid="subscriptions">
              <thead>
                <tr>
                  <th>Queue</th>
                  <th>Mode</th>
                  <th>Start</th>
                </tr>
              </thead>
              <tbody>
                {data.subscriptions.map((s) => (
                  <tr>
                    <td>{s.queue}</td>
                    <td data-col="mode">{s.mode}</td>
                    <td>{time(s.timestamp)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            {data.subscriptions.length === 0 ? <p class="muted">No subscription rows (queue mode, or a group that has not popped a named queue).</p> : null}
          </Section>
          {mayQueueSeek ? (
            <Section title="Seek a whole queue">
              {queues.map((queue) => (
                <div class="toolbar" data-seek={queue}>
                  <strong>{queue}</strong>
                  <button onClick={() => act(`Move ${name} on every partition of ${queue} to the end`, () => call('seekQueue', { params: { group: name, queue }, body: { toEnd: true } }))}>
                    Seek to end
                  </button>
                  <input type="datetime-local" step={1} value={when[queue] ?? ''} onInput={(e) => setWhen({ ...when, [queue]: e.currentTarget.value })} />
                  <button
                    disabled={!when[queue]}
                    onClick={() =>
                      act(`Move ${name} on every partition of ${queue} to ${when[queue]}`, () =>
                        call('seekQueue', { params: { group: name, queue }, body: { timestamp: new Date(when[queue]!).toISOString() } }),
                      )
                    }
                  >
                    Seek to time
                  </button>
                </div>
              ))}
              <p class="muted">Seeking releases the group's leases on those partitions and clears their failure counts.</p>
            </Section>
          ) : null}
        </>
      ) : null}
    </>
  );
}
