import { useEffect, useState } from 'preact/hooks';
import { api, formatMoney, formatTime, withQuery, type Me, type Mode, type Money } from '../api.js';
import { href } from '../route.js';
import { SnapshotList } from './snapshots.js';
import { Code, Empty, ErrorNote, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface Session {
  id: string;
  userId: string;
  environment: string;
  createdAt: string;
}

interface Agent {
  id: string;
  status: string;
  sessionId: string;
  compute: string;
  model: string | null;
  createdAt: string;
  cost: Money;
}

/** Reloads every `ms` while the page is visible: statuses change under the page. */
function useEvery(ms: number, reload: () => void) {
  useEffect(() => {
    const timer = setInterval(() => document.visibilityState === 'visible' && reload(), ms);
    return () => clearInterval(timer);
  }, [ms, reload]);
}

export function Sessions(props: { mode: Mode }) {
  const loaded = useLoad(() => api<{ data: Session[]; hasMore: boolean }>(withQuery('/api/sessions', { mode: props.mode, limit: 100 })), props.mode);
  const [user, setUser] = useState('');
  const [environment, setEnvironment] = useState('');
  return (
    <>
      <PageHeader title="Sessions and agents" intro={`One session per end-user of your application; agents run in them (${props.mode} keys).`} />
      <form class="inline-form filters" role="search" aria-label="Filter sessions" onSubmit={(event) => event.preventDefault()}>
        <label>
          User <input value={user} onInput={(event) => setUser((event.target as HTMLInputElement).value)} placeholder="user id" />
        </label>
        <label>
          Environment{' '}
          <select value={environment} onChange={(event) => setEnvironment((event.target as HTMLSelectElement).value)}>
            <option value="">all</option>
            <option value="production">production</option>
            <option value="staging">staging</option>
            <option value="development">development</option>
          </select>
        </label>
      </form>
      <Loading loaded={loaded}>
        {() => {
          const sessions = loaded.data!.data.filter((session) => session.userId.includes(user) && (!environment || session.environment === environment));
          if (loaded.data!.data.length === 0)
            return (
              <Empty title="No sessions yet">
                <p>
                  Your backend creates one per user with <Code>POST /v1/sessions/by-user/{'{userId}'}</Code> and starts agents in it; they show here with their
                  live status and cost.
                </p>
              </Empty>
            );
          return (
            <Table caption="Sessions" head={['User', 'Session', 'Environment', 'Created']} captionHidden>
              {sessions.map((session) => (
                <tr>
                  <td>{session.userId}</td>
                  <td>
                    <a href={href('sessions', session.id)}>{session.id}</a>
                  </td>
                  <td>{session.environment}</td>
                  <td>{formatTime(session.createdAt)}</td>
                </tr>
              ))}
            </Table>
          );
        }}
      </Loading>
    </>
  );
}

export function SessionAgents(props: { mode: Mode; id: string }) {
  const loaded = useLoad(async () => {
    const [session, agents] = await Promise.all([
      api<Session>(withQuery(`/api/sessions/${props.id}`, { mode: props.mode })),
      api<{ data: Agent[] }>(withQuery(`/api/sessions/${props.id}/agents`, { mode: props.mode })),
    ]);
    return { session, agents: agents.data };
  }, `${props.mode}/${props.id}`);
  useEvery(3000, loaded.reload);
  return (
    <>
      <PageHeader title={`Session of ${loaded.data?.session.userId ?? '…'}`} intro={props.id} />
      <p>
        <a href={href('sessions')}>All sessions</a>
      </p>
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.agents.length === 0 ? (
            <Empty title="No agents in this session">
              <p>
                Start one with <Code>POST /v1/sessions/{props.id}/agents</Code>.
              </p>
            </Empty>
          ) : (
            <Table caption="Agents" head={['Agent', 'Status', 'Compute', 'Model', 'Cost', 'Created']} captionHidden>
              {loaded.data!.agents.map((agent) => (
                <tr>
                  <td>
                    <a href={href('agents', agent.id)}>{agent.id}</a>
                  </td>
                  <td>
                    <span class={`status status-${agent.status}`}>{agent.status}</span>
                  </td>
                  <td>{agent.compute}</td>
                  <td>{agent.model ?? '—'}</td>
                  <td>{formatMoney(agent.cost)}</td>
                  <td>{formatTime(agent.createdAt)}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}

interface StreamLine {
  id: string;
  event: string;
  text: string;
}

const STREAM_EVENTS = ['thinking', 'tool_call', 'tool_result', 'output', 'error'] as const;

function describe(event: string, data: Record<string, unknown>): string {
  if (event === 'thinking' || event === 'output') return String(data.text ?? '');
  if (event === 'tool_call') return `${String(data.tool)} ${JSON.stringify(data.input)}`;
  if (event === 'tool_result') return `${String(data.tool)} → exit ${String(data.exitCode ?? '—')}: ${String(data.output ?? '')}`;
  return `${String(data.code)}: ${String(data.message)}`;
}

export function AgentPage(props: { me: Me; mode: Mode; id: string }) {
  const canRun = props.me.permissions.includes('sessions.manage');
  const loaded = useLoad(() => api<Agent>(withQuery(`/api/agents/${props.id}`, { mode: props.mode })), `${props.mode}/${props.id}`);
  useEvery(3000, loaded.reload);
  const [lines, setLines] = useState<StreamLine[]>([]);
  const [connected, setConnected] = useState(false);
  const [exec, setExec] = useState<{ stdout: string; stderr: string; exitCode: number; durationMs: number } | undefined>();
  const [error, setError] = useState<Error | undefined>();
  const [running, setRunning] = useState(false);

  useEffect(() => {
    setLines([]);
    const source = new EventSource(withQuery(`/api/agents/${props.id}/stream`, { mode: props.mode }));
    source.onopen = () => setConnected(true);
    source.onerror = () => setConnected(false);
    for (const name of STREAM_EVENTS)
      source.addEventListener(name, (message) => {
        const data = JSON.parse((message as MessageEvent<string>).data) as Record<string, unknown>;
        const text = describe(name, data);
        // The model's text arrives in pieces: one line for each stretch of thinking.
        setLines((previous) => {
          const last = previous.at(-1);
          if (name === 'thinking' && last?.event === 'thinking') return [...previous.slice(0, -1), { ...last, text: last.text + text }];
          return [...previous.slice(-199), { id: (message as MessageEvent).lastEventId, event: name, text }];
        });
      });
    return () => source.close();
  }, [props.id, props.mode]);

  async function run(event: Event) {
    event.preventDefault();
    const data = new FormData(event.currentTarget as HTMLFormElement);
    setRunning(true);
    setError(undefined);
    try {
      setExec(
        await api(withQuery(`/api/agents/${props.id}/exec`, { mode: props.mode }), {
          method: 'POST',
          body: { language: String(data.get('language')), code: String(data.get('code')) },
        }),
      );
    } catch (failure) {
      setError(failure as Error);
    } finally {
      setRunning(false);
    }
  }

  return (
    <>
      <PageHeader title="Agent" intro={props.id} />
      <Loading loaded={loaded}>
        {() => {
          const agent = loaded.data!;
          return (
            <>
              <dl class="facts">
                <div>
                  <dt>Status</dt>
                  <dd>
                    <span class={`status status-${agent.status}`} id="agent-status">
                      {agent.status}
                    </span>
                  </dd>
                </div>
                <div>
                  <dt>Cost so far</dt>
                  <dd id="agent-cost">{formatMoney(agent.cost)}</dd>
                </div>
                <div>
                  <dt>Compute</dt>
                  <dd>{agent.compute}</dd>
                </div>
                <div>
                  <dt>Model</dt>
                  <dd>{agent.model ?? '—'}</dd>
                </div>
                <div>
                  <dt>Session</dt>
                  <dd>
                    <a href={href('sessions', agent.sessionId)}>{agent.sessionId}</a>
                  </dd>
                </div>
              </dl>
            </>
          );
        }}
      </Loading>
      <section aria-labelledby="stream-title">
        <h2 id="stream-title">
          Live stream <span class="muted">({connected ? 'connected' : 'connecting…'})</span>
        </h2>
        {lines.length === 0 ? (
          <p class="muted">No events yet: the agent's runs (its thinking, tool calls and answers) appear here as they happen.</p>
        ) : (
          <ol class="stream" aria-live="polite" id="agent-stream">
            {lines.map((line) => (
              <li class={`stream-${line.event}`} data-event={line.event}>
                <span class="stream-event">{line.event}</span> {line.text}
              </li>
            ))}
          </ol>
        )}
      </section>
      <section aria-labelledby="snapshots-title">
        <h2 id="snapshots-title">Snapshots</h2>
        <SnapshotList me={props.me} mode={props.mode} query={{ agentId: props.id }} />
      </section>
      {canRun && (
        <section aria-labelledby="exec-title">
          <h2 id="exec-title">Exec console</h2>
          <form class="exec" onSubmit={run}>
            <label>
              Language{' '}
              <select name="language">
                <option value="python">python</option>
                <option value="typescript">typescript</option>
                <option value="bash">bash</option>
              </select>
            </label>
            <label class="block">
              Code
              <textarea name="code" rows={4} required spellcheck={false} />
            </label>
            <button type="submit" disabled={running}>
              {running ? 'Running…' : 'Run'}
            </button>
          </form>
          <ErrorNote error={error} />
          {exec && (
            <div role="status" id="exec-result">
              <p>
                Exit code {exec.exitCode} in {exec.durationMs} ms
              </p>
              <pre class="output">{exec.stdout}</pre>
              {exec.stderr && <pre class="output stderr">{exec.stderr}</pre>}
            </div>
          )}
        </section>
      )}
    </>
  );
}
