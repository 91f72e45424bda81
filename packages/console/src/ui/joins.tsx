import { call } from './api.js';
import { ErrorBox, Section, time, usePoll, Watermark } from './components.js';

/** A join's buffers change with every cycle, like open windows. */
const JOINS_REFRESH_MS = 3000;

/**
 * What a join holds while it waits for the other side: per partition name,
 * the keys and records buffered on each side and each side's time (its
 * watermark), past which a record's bound closes. Shown only for a query
 * with a join; a windowed query's rows are its open windows.
 */
export function JoinBuffers({ name, partition }: { name: string; partition: string | undefined }) {
  const joins = usePoll(() => call('streamsJoins', { params: { name }, query: { partition, limit: 200 } }), [name, partition], JOINS_REFRESH_MS);
  const j = joins.data;
  if (!joins.error && (!j || j.total === 0)) return null;
  return (
    <Section title={`Join buffers${partition ? ` of partition ${partition}` : ''} (refreshing every ${JOINS_REFRESH_MS / 1000} s)`}>
      <ErrorBox error={joins.error} />
      {j ? (
        <>
          <table data-testid="joins">
            <thead>
              <tr>
                <th>Partition</th>
                <th class="num">Left keys</th>
                <th class="num">Left records</th>
                <th>Left time</th>
                <th class="num">Right keys</th>
                <th class="num">Right records</th>
                <th>Right time</th>
                <th>Updated</th>
              </tr>
            </thead>
            <tbody>
              {j.shards.map((s) => (
                <tr data-partition={s.partition ?? s.shard_id}>
                  <td>{s.partition ?? s.shard_id}</td>
                  <td class="num">{s.left.keys}</td>
                  <td class="num" data-col="left-records">
                    {s.left.records}
                  </td>
                  <td>
                    <Watermark ms={s.left.watermark} />
                  </td>
                  <td class="num">{s.right.keys}</td>
                  <td class="num" data-col="right-records">
                    {s.right.records}
                  </td>
                  <td>
                    <Watermark ms={s.right.watermark} />
                  </td>
                  <td>{time(s.updated_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p class="muted">
            {j.total > j.shards.length ? `${j.shards.length} of ${j.total} partitions. ` : ''}
            A record waits here until the other side's time passes its bound (in processing time also the broker's clock, once both queues are
            quiet); then an inner join drops it and a left join emits it alone if nothing paired with it.
          </p>
        </>
      ) : null}
    </Section>
  );
}
