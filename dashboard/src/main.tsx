import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiFailure, api, useCsrfToken, type Me, type Mode } from './api.js';
import { Audit } from './pages/audit.js';
import { ChannelPage, Channels } from './pages/channels.js';
import { DefinitionPage, Definitions } from './pages/definitions.js';
import { FleetPage, Fleets } from './pages/fleets.js';
import { Snapshots } from './pages/snapshots.js';
import { Triggers } from './pages/triggers.js';
import { WorkflowPage, WorkflowRunPage, Workflows } from './pages/workflows.js';
import { Keys } from './pages/keys.js';
import { Overview } from './pages/overview.js';
import { AgentPage, SessionAgents, Sessions } from './pages/sessions.js';
import { Providers } from './pages/providers.js';
import { ScheduleHistory, Schedules } from './pages/schedules.js';
import { Secrets } from './pages/secrets.js';
import { Team } from './pages/team.js';
import { Usage } from './pages/usage.js';
import { WebhookDeliveries, Webhooks } from './pages/webhooks.js';
import { href, useRoute } from './route.js';
import { ErrorNote } from './ui.js';
import './styles.css';

/** The pages of the navigation, with the permission each needs to be offered. */
const NAV: { page: string; label: string; permission: string }[] = [
  { page: 'overview', label: 'Overview', permission: 'billing.view' },
  { page: 'sessions', label: 'Sessions and agents', permission: 'sessions.view' },
  { page: 'snapshots', label: 'Snapshots', permission: 'sessions.view' },
  { page: 'usage', label: 'Usage', permission: 'billing.view' },
  { page: 'definitions', label: 'Agent definitions', permission: 'agentResources.view' },
  { page: 'workflows', label: 'Workflows', permission: 'observability.view' },
  { page: 'fleets', label: 'Fleets', permission: 'observability.view' },
  { page: 'schedules', label: 'Schedules', permission: 'observability.view' },
  { page: 'triggers', label: 'Triggers', permission: 'observability.view' },
  { page: 'channels', label: 'Channels', permission: 'observability.view' },
  { page: 'keys', label: 'API keys', permission: 'keys.view' },
  { page: 'webhooks', label: 'Webhooks', permission: 'observability.view' },
  { page: 'secrets', label: 'Secrets', permission: 'secrets.view' },
  { page: 'providers', label: 'BYOI providers', permission: 'providers.view' },
  { page: 'team', label: 'Team', permission: 'team.view' },
  { page: 'audit', label: 'Audit log', permission: 'audit.view' },
];

type Theme = 'light' | 'dark';

function initialTheme(): Theme {
  const stored = localStorage.getItem('berth-theme');
  if (stored === 'light' || stored === 'dark') return stored;
  return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

function SignIn(props: { failure?: Error | undefined }) {
  return (
    <main id="main" class="sign-in">
      <h1>Sign in to Berth</h1>
      <p>Sign in with your organization's identity provider to manage keys, agents, usage and your team.</p>
      <p>
        <a class="button" href={`/api/auth/login?returnTo=${encodeURIComponent('/' + location.hash)}`}>
          Sign in
        </a>
      </p>
      <p class="muted">
        On a single-machine install without an identity provider, run <code>berth admin login</code> and open the one-time link it prints.
      </p>
      <ErrorNote error={props.failure} />
    </main>
  );
}

/** The navigation entry a page belongs to: an agent's page to sessions, a workflow run's to workflows. */
function navPage(page: string): string {
  return ({ agents: 'sessions', 'workflow-runs': 'workflows' } as Record<string, string>)[page] ?? page;
}

function Page(props: { me: Me; mode: Mode; page: string; id: string | undefined; period: string; setPeriod: (period: string) => void }) {
  const { me, mode, id } = props;
  const entry = NAV.find((item) => item.page === navPage(props.page));
  if (!entry) return <NotFound />;
  if (!me.permissions.includes(entry.permission))
    return (
      <>
        <h1 id="page-title" tabIndex={-1}>
          {entry.label}
        </h1>
        <p>Your role ({me.organization?.role ?? 'none'}) cannot see this page.</p>
      </>
    );
  switch (props.page) {
    case 'overview':
      return <Overview mode={mode} />;
    case 'usage':
      return <Usage mode={mode} period={props.period} setPeriod={props.setPeriod} />;
    case 'keys':
      return <Keys me={me} />;
    case 'team':
      return <Team me={me} />;
    case 'audit':
      return <Audit />;
    case 'secrets':
      return <Secrets me={me} mode={mode} />;
    case 'providers':
      return <Providers me={me} mode={mode} />;
    case 'definitions':
      return id ? <DefinitionPage me={me} mode={mode} id={id} /> : <Definitions mode={mode} />;
    case 'snapshots':
      return <Snapshots me={me} mode={mode} />;
    case 'triggers':
      return <Triggers mode={mode} />;
    case 'workflows':
      return id ? <WorkflowPage mode={mode} id={id} /> : <Workflows mode={mode} />;
    case 'workflow-runs':
      return id ? <WorkflowRunPage mode={mode} id={id} /> : <Workflows mode={mode} />;
    case 'fleets':
      return id ? <FleetPage mode={mode} id={id} /> : <Fleets mode={mode} />;
    case 'channels':
      return id ? <ChannelPage mode={mode} id={id} /> : <Channels mode={mode} />;
    case 'schedules':
      return id ? <ScheduleHistory mode={mode} id={id} /> : <Schedules mode={mode} />;
    case 'webhooks':
      return id ? <WebhookDeliveries me={me} mode={mode} id={id} /> : <Webhooks me={me} mode={mode} />;
    case 'sessions':
      return id ? <SessionAgents mode={mode} id={id} /> : <Sessions mode={mode} />;
    case 'agents':
      return id ? <AgentPage me={me} mode={mode} id={id} /> : <Sessions mode={mode} />;
    default:
      return <NotFound />;
  }
}

function NotFound() {
  return (
    <>
      <h1 id="page-title" tabIndex={-1}>
        Not found
      </h1>
      <p>
        There is no such page. <a href={href('overview')}>Go to the overview</a>.
      </p>
    </>
  );
}

function App() {
  const route = useRoute();
  const [me, setMe] = useState<Me | undefined>();
  const [failure, setFailure] = useState<Error | undefined>();
  const [signedOut, setSignedOut] = useState(false);
  const [mode, setMode] = useState<Mode>(() => (localStorage.getItem('berth-mode') === 'test' ? 'test' : 'live'));
  const [theme, setTheme] = useState<Theme>(initialTheme);
  const [period, setPeriod] = useState('last_30_days');

  useEffect(() => {
    api<Me>('/api/me').then(
      (answer) => {
        useCsrfToken(answer.csrfToken);
        setMe(answer);
      },
      (error: Error) => (error instanceof ApiFailure && error.status === 401 ? setSignedOut(true) : setFailure(error)),
    );
  }, []);
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    localStorage.setItem('berth-theme', theme);
  }, [theme]);
  useEffect(() => localStorage.setItem('berth-mode', mode), [mode]);
  // A new page moves the focus to its heading, as a page load would, for keyboards and screen readers.
  useEffect(() => {
    const heading = document.getElementById('page-title');
    if (heading && document.activeElement !== document.body) heading.focus();
    const title = heading?.textContent;
    document.title = title ? `${title} · Berth` : 'Berth';
  });

  if (signedOut) return <SignIn />;
  if (!me)
    return (
      <main id="main">
        {failure ? (
          <ErrorNote error={failure} />
        ) : (
          <p class="muted" role="status">
            Loading…
          </p>
        )}
      </main>
    );
  if (!me.organization)
    return (
      <main id="main" class="sign-in">
        <h1>No organization yet</h1>
        <p>
          You are signed in as <code>{me.user.email ?? me.user.id}</code>. Ask an owner or admin to invite your user id <code>{me.user.id}</code>, then reload.
        </p>
      </main>
    );

  async function signOut() {
    await api('/api/auth/logout', { method: 'POST' });
    setMe(undefined);
    setSignedOut(true);
  }

  const current = navPage(route.page);
  return (
    <>
      <a class="skip" href="#main" onClick={(event) => (event.preventDefault(), document.getElementById('page-title')?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Berth</span>
        <span class="org">
          {me.organization.name} <span class="role">{me.organization.role}</span>
        </span>
        <div class="controls">
          <label>
            Data{' '}
            <select value={mode} onChange={(event) => setMode((event.target as HTMLSelectElement).value as Mode)}>
              <option value="live">live keys</option>
              <option value="test">test keys</option>
            </select>
          </label>
          <button type="button" aria-pressed={theme === 'dark'} onClick={() => setTheme(theme === 'dark' ? 'light' : 'dark')}>
            Dark theme
          </button>
          <button type="button" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <div class="layout">
        <nav aria-label="Pages">
          <ul>
            {NAV.filter((item) => me.permissions.includes(item.permission)).map((item) => (
              <li>
                <a href={href(item.page)} aria-current={current === item.page ? 'page' : undefined}>
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main">
          <Page me={me} mode={mode} page={route.page} id={route.id} period={period} setPeriod={setPeriod} />
        </main>
      </div>
    </>
  );
}

render(<App />, document.getElementById('app')!);
