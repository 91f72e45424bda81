import type { AccessLevel, dlqMessage, z } from '@queen-mq/protocol';
import { useEffect, useState } from 'preact/hooks';
import { call, can } from './api.js';
import { confirmed, ErrorBox, Json, Pager, preview, time, usePoll } from './components.js';
import { href, navigate } from './router.js';

const PAGE = 100;

type DlqEntry = z.output<typeof dlqMessage>;

/** One row per (message, group); actions name the message, so they act on every group's entry unless one is picked. */
const rowKey = (m: DlqEntry) => `${m.id}/${m.consumerGroup}`;

export function DlqPage({ level, query }: { level: AccessLevel; query: URLSearchParams }) {
  const queue = query.get('queue') ?? '';
  const group = query.get('consumerGroup') ?? '';
  const [offset, setOffset] = useState(0);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [open, setOpen] = useState<string | undefined>();
  const [notice, setNotice] = useState<string | undefined>();
  const [actionError, setActionError] = useState<Error | undefined>();
  const [filter, setFilter] = useState({ queue, group });
  useEffect(() => setFilter({ queue, group }), [queue, group]);
  const { data, error, reload } = usePoll(
    () => call('dlq', { query: { queue: queue || undefined, consumerGroup: group || undefined, limit: PAGE, offset } }),
    [queue, group, offset],
    5000,
  );
  const mayRequeue = can(level, 'dlqRequeue');
  const mayDelete = can(level, 'dlqDelete');
  const chosen = (data?.messages ?? []).filter((m) => selected.has(rowKey(m)));

  const act = async (route: 'dlqRequeue' | 'dlqDelete', entries: DlqEntry[]) => {
    const verb = route === 'dlqRequeue' ? 'Requeue' : 'Delete';
    if (entries.length === 0 || !confirmed(`${verb} ${entries.length} dead-lettered message(s)${group ? ` of group ${group}` : ''}?`)) return;
    setNotice(undefined);
    setActionError(undefined);
    try {
      const body = { ids: [...new Set(entries.map((m) => m.id))], ...(group ? { consumerGroup: group } : {}) };
      const notFound = (results: { success: boolean }[]) => results.filter((x) => !x.success).length;
      if (route === 'dlqRequeue') {
        const r = await call('dlqRequeue', { body });
        const full = r.results.filter((x) => x.code === 'QUEUE_FULL').length;
        const failed = notFound(r.results) - full;
        setNotice(
          `Requeued ${r.requeued} message(s)${full ? `; ${full} kept in the DLQ (their queue is at its maxSize)` : ''}${failed ? `; ${failed} not found (already requeued or deleted)` : ''}`,
        );
      } else {
        const r = await call('dlqDelete', { body });
        const failed = notFound(r.results);
        setNotice(`Deleted the DLQ entries of ${r.deleted} message(s)${failed ? `; ${failed} not found` : ''}`);
      }
      setSelected(new Set());
      reload();
    } catch (err) {
      setActionError(err as Error);
    }
  };

  const toggle = (m: DlqEntry) => {
    const next = new Set(selected);
    if (next.has(rowKey(m))) next.delete(rowKey(m));
    else next.add(rowKey(m));
    setSelected(next);
  };
  const shown = data?.messages.find((m) => rowKey(m) === open);

  return (
    <>
      <h2>Dead-letter queue</h2>
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          setOffset(0);
          navigate(href('dlq', { queue: filter.queue.trim(), consumerGroup: filter.group.trim() }));
        }}
      >
        <input name="queue" placeholder="queue" value={filter.queue} onInput={(e) => setFilter({ ...filter, queue: e.currentTarget.value })} />
        <input name="consumerGroup" placeholder="consumer group" value={filter.group} onInput={(e) => setFilter({ ...filter, group: e.currentTarget.value })} />
        <button type="submit">Filter</button>
        {mayRequeue ? (
          <button type="button" class="primary" disabled={chosen.length === 0} onClick={() => act('dlqRequeue', chosen)}>
            Requeue selected ({chosen.length})
          </button>
        ) : null}
        {mayDelete ? (
          <button type="button" class="danger" disabled={chosen.length === 0} onClick={() => act('dlqDelete', chosen)}>
            Delete selected ({chosen.length})
          </button>
        ) : null}
        {!mayRequeue ? <span class="muted">Requeue and delete need an admin token.</span> : null}
      </form>
      <ErrorBox error={error} />
      <ErrorBox error={actionError} />
      {notice ? (
        <div class="notice" data-testid="notice">
          {notice}
        </div>
      ) : null}
      {data ? (
        <>
          <table data-testid="dlq">
            <thead>
              <tr>
                {mayRequeue || mayDelete ? (
                  <th>
                    <input
                      type="checkbox"
                      aria-label="select all"
                      checked={data.messages.length > 0 && chosen.length === data.messages.length}
                      onChange={(e) => setSelected(e.currentTarget.checked ? new Set(data.messages.map(rowKey)) : new Set())}
                    />
                  </th>
                ) : null}
                <th>Queue</th>
                <th>Partition</th>
                <th>Group</th>
                <th class="num">Offset</th>
                <th>Error</th>
                <th class="num">Retries</th>
                <th>Failed</th>
                <th>Payload</th>
                {mayRequeue ? <th /> : null}
              </tr>
            </thead>
            <tbody>
              {data.messages.map((m) => (
                <tr class={`clickable${open === rowKey(m) ? ' selected' : ''}`} data-id={m.id} onClick={() => setOpen(open === rowKey(m) ? undefined : rowKey(m))}>
                  {mayRequeue || mayDelete ? (
                    <td onClick={(e) => e.stopPropagation()}>
                      <input type="checkbox" aria-label={`select ${m.transactionId}`} checked={selected.has(rowKey(m))} onChange={() => toggle(m)} />
                    </td>
                  ) : null}
                  <td>{m.queue}</td>
                  <td>{m.partition}</td>
                  <td>{m.consumerGroup}</td>
                  <td class="num">{m.offset}</td>
                  <td data-col="error">{m.errorMessage ?? '—'}</td>
                  <td class="num" data-col="retries">
                    {m.retryCount}
                  </td>
                  <td>{time(m.failedAt)}</td>
                  <td>
                    <code>{preview(m.data, 50)}</code>
                  </td>
                  {mayRequeue ? (
                    <td onClick={(e) => e.stopPropagation()}>
                      <button onClick={() => act('dlqRequeue', [m])}>Requeue</button>
                    </td>
                  ) : null}
                </tr>
              ))}
            </tbody>
          </table>
          {data.messages.length === 0 ? <p class="muted">The DLQ is empty{queue || group ? ' for this filter' : ''}.</p> : null}
          <Pager offset={offset} limit={PAGE} shown={data.messages.length} total={data.total} onChange={setOffset} />
          {shown ? (
            <div data-testid="dlq-payload">
              <h3>
                {shown.queue}/{shown.partition} offset {shown.offset} <span class="muted">({shown.transactionId})</span>
              </h3>
              <p>{shown.errorMessage ?? 'No error message.'}</p>
              <Json value={shown.data} class="payload" />
            </div>
          ) : null}
          <p class="muted">Requeue pushes the message again at its partition's head (a new offset) and removes its DLQ entries; delete removes the entries only.</p>
        </>
      ) : null}
    </>
  );
}
