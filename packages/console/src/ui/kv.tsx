import { useEffect, useState } from 'preact/hooks';
import { call } from './api.js';
import { duration, ErrorBox, Json, preview, time, usePoll } from './components.js';
import { href, navigate } from './router.js';

const PAGE = 100;

export function KvPage({ query }: { query: URLSearchParams }) {
  const namespace = query.get('ns') ?? '';
  const prefix = query.get('prefix') ?? '';
  const after = query.get('after') ?? '';
  const [form, setForm] = useState({ namespace, prefix });
  // The address is the truth: a link or the back button changes it, and the form follows.
  useEffect(() => setForm({ namespace, prefix }), [namespace, prefix]);
  const [open, setOpen] = useState<string | undefined>();
  const { data, error } = usePoll(
    async () => (namespace ? call('kvList', { params: { namespace }, query: { prefix: prefix || undefined, after: after || undefined, limit: PAGE } }) : undefined),
    [namespace, prefix, after],
    10000,
  );
  const nsAfter = query.get('nsAfter') ?? '';
  const namespaces = usePoll(
    async () => (namespace ? undefined : call('kvNamespaces', { query: { after: nsAfter || undefined, limit: PAGE } })),
    [namespace, nsAfter],
  );
  const now = Date.now();
  const shown = data?.items.find((i) => i.key === open);
  return (
    <>
      <h2>KV</h2>
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          navigate(href('kv', { ns: form.namespace.trim(), prefix: form.prefix }));
        }}
      >
        <input name="namespace" placeholder="namespace" required value={form.namespace} onInput={(e) => setForm({ ...form, namespace: e.currentTarget.value })} />
        <input name="prefix" placeholder="key prefix (literal)" value={form.prefix} onInput={(e) => setForm({ ...form, prefix: e.currentTarget.value })} />
        <button type="submit">Browse</button>
      </form>
      <ErrorBox error={error} />
      {!namespace ? <p class="muted">Pick or name a namespace to list its keys, in bytewise order; the prefix is matched literally (no wildcards).</p> : null}
      <ErrorBox error={namespaces.error} />
      {namespaces.data ? (
        <>
          <ul data-testid="kv-namespaces">
            {namespaces.data.namespaces.map((n) => (
              <li>
                <a href={href('kv', { ns: n })}>{n}</a>
              </li>
            ))}
          </ul>
          {namespaces.data.namespaces.length === 0 ? <p class="muted">The KV is empty.</p> : null}
          {namespaces.data.nextAfter ? <a href={href('kv', { nsAfter: namespaces.data.nextAfter })}>More namespaces</a> : null}
        </>
      ) : null}
      {data ? (
        <>
          <table data-testid="kv">
            <thead>
              <tr>
                <th>Key</th>
                <th>Value</th>
                <th class="num">Version</th>
                <th>Expires</th>
                <th>TTL left</th>
                <th>Updated</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((i) => (
                <tr class={`clickable${open === i.key ? ' selected' : ''}`} data-key={i.key} onClick={() => setOpen(open === i.key ? undefined : i.key)}>
                  <td>
                    <code>{i.key}</code>
                  </td>
                  <td>
                    <code>{preview(i.value, 60)}</code>
                  </td>
                  <td class="num">{i.version}</td>
                  <td>{i.expiresAt ? time(i.expiresAt) : 'never'}</td>
                  <td data-col="ttl">{i.expiresAt ? duration((Date.parse(i.expiresAt) - now) / 1000) : '—'}</td>
                  <td>{time(i.updatedAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {data.items.length === 0 ? <p class="muted">No keys{prefix ? ` starting with "${prefix}"` : ''} in {namespace}.</p> : null}
          <div class="toolbar">
            <button disabled={!after} onClick={() => navigate(href('kv', { ns: namespace, prefix }))}>
              First page
            </button>
            <button disabled={!data.nextAfter} onClick={() => navigate(href('kv', { ns: namespace, prefix, after: data.nextAfter ?? undefined }))}>
              Next page
            </button>
          </div>
          {shown ? (
            <div data-testid="kv-value">
              <h3>
                <code>{shown.key}</code>
              </h3>
              <Json value={shown.value} class="payload" />
            </div>
          ) : null}
        </>
      ) : null}
    </>
  );
}
