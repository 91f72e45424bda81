import { render } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, call, getToken, setToken } from './api.js';
import { ErrorBox, usePoll } from './components.js';
import { DlqPage } from './dlq.js';
import { GroupPage, GroupsPage } from './groups.js';
import { OverviewPage } from './history.js';
import { KvPage } from './kv.js';
import { QueuePage, QueuesPage } from './queues.js';
import { SchedulesPage } from './schedules.js';
import { href, useLocation } from './router.js';
import { StreamPage, StreamsPage } from './streams.js';

const SECTIONS = [
  ['overview', 'Overview'],
  ['queues', 'Queues'],
  ['groups', 'Consumer groups'],
  ['dlq', 'DLQ'],
  ['streams', 'Streams'],
  ['kv', 'KV'],
  ['schedules', 'Schedules'],
] as const;

function Login({ error, onToken }: { error?: Error; onToken: (token: string) => void }) {
  const [value, setValue] = useState('');
  return (
    <form
      class="login"
      onSubmit={(e) => {
        e.preventDefault();
        onToken(value.trim());
      }}
    >
      <strong>This broker requires a token</strong>
      <span class="muted">An API key or a JWT. A read-only token sees everything; actions need the level of their route (admin for DLQ requeue and delete).</span>
      <input name="token" type="password" autocomplete="off" placeholder="Bearer token" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
      <button class="primary" type="submit">
        Sign in
      </button>
      {error && getToken() ? <ErrorBox error={error} /> : null}
    </form>
  );
}

function App() {
  const [tokenRev, setTokenRev] = useState(0);
  const session = usePoll(() => call('consoleSession'), [tokenRev], 30000);
  const loc = useLocation();
  const useToken = (token: string) => {
    setToken(token);
    setTokenRev((n) => n + 1);
  };
  const authFailed = session.error instanceof ApiError && (session.error.status === 401 || session.error.status === 403);
  const [section = 'queues', name] = loc.parts;
  const level = session.data?.level;
  let page = null;
  if (level) {
    if (section === 'overview') page = <OverviewPage />;
    else if (section === 'queues') page = name ? <QueuePage name={name} query={loc.query} /> : <QueuesPage />;
    else if (section === 'groups') page = name ? <GroupPage name={name} level={level} /> : <GroupsPage />;
    else if (section === 'dlq') page = <DlqPage level={level} query={loc.query} />;
    else if (section === 'streams') page = name ? <StreamPage name={name} level={level} /> : <StreamsPage />;
    else if (section === 'kv') page = <KvPage query={loc.query} />;
    else if (section === 'schedules') page = <SchedulesPage level={level} />;
    else page = <p>Unknown page.</p>;
  }
  return (
    <>
      <header>
        <h1>Queen console</h1>
        <nav>
          {SECTIONS.map(([id, label]) => (
            <a href={href(id)} class={section === id ? 'active' : ''}>
              {label}
            </a>
          ))}
        </nav>
        <div class="who">
          {session.data ? (
            <>
              <span data-testid="level" class="badge">
                {session.data.level}
              </span>
              {session.data.subject ? <span>{session.data.subject}</span> : null}
              <span>v{session.data.version}</span>
              {session.data.authEnabled ? <button onClick={() => useToken('')}>Sign out</button> : <span>auth off</span>}
            </>
          ) : null}
        </div>
      </header>
      <main>
        {authFailed ? <Login error={session.error} onToken={useToken} /> : <ErrorBox error={session.error} />}
        {authFailed ? null : page}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
