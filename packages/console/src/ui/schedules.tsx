import type { AccessLevel } from '@queen-mq/protocol';
import { useState } from 'preact/hooks';
import { call, can } from './api.js';
import { confirmed, duration, ErrorBox, preview, time, usePoll } from './components.js';
import { href } from './router.js';

const REFRESH_MS = 5000;

/** Recurring schedules by name, with when each fires next (and how long until then). */
export function SchedulesPage({ level }: { level: AccessLevel }) {
  const { data, error, reload } = usePoll(() => call('scheduleList', { query: { limit: 1000 } }), [], REFRESH_MS);
  const [actionError, setActionError] = useState<Error | undefined>();
  const mayDelete = can(level, 'scheduleDelete');
  const remove = async (name: string) => {
    if (!confirmed(`Delete schedule ${name}?`)) return;
    setActionError(undefined);
    try {
      await call('scheduleDelete', { params: { name } });
      reload();
    } catch (err) {
      setActionError(err as Error);
    }
  };
  const now = Date.now();
  return (
    <>
      <h2>Schedules</h2>
      <ErrorBox error={error ?? actionError} />
      {data ? (
        <table data-testid="schedules">
          <thead>
            <tr>
              <th>Name</th>
              <th>Cron</th>
              <th>Time zone</th>
              <th>Queue / partition</th>
              <th>Payload</th>
              <th>Missed</th>
              <th>Next fire</th>
              <th>In</th>
              <th>Last fire</th>
              {mayDelete ? <th /> : null}
            </tr>
          </thead>
          <tbody>
            {data.schedules.map((s) => (
              <tr data-schedule={s.name}>
                <td>{s.name}</td>
                <td>
                  <code>{s.cron}</code>
                </td>
                <td>{s.timeZone}</td>
                <td>
                  <a href={href('queues', s.queue)}>{s.queue}</a> / {s.partition}
                </td>
                <td>
                  <code>{preview(s.payload, 40)}</code>
                </td>
                <td>{s.missed}</td>
                <td data-col="next">{time(s.nextFireAt)}</td>
                <td>{duration(Math.max(0, (Date.parse(s.nextFireAt) - now) / 1000))}</td>
                <td>{time(s.lastFireAt)}</td>
                {mayDelete ? (
                  <td>
                    <button onClick={() => remove(s.name)}>Delete</button>
                  </td>
                ) : null}
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {data?.schedules.length === 0 ? <p class="muted">No schedules: create one with POST /api/v1/schedules, queen.schedule() or `queen schedules add`.</p> : null}
      {data && data.total > data.schedules.length ? <p class="muted">Showing the first {data.schedules.length} of {data.total}.</p> : null}
    </>
  );
}
