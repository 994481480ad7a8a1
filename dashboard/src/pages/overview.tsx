import { api, formatMoney, formatTime, withQuery, type Mode, type Money } from '../api.js';
import { href } from '../route.js';
import { Empty, Loading, PageHeader, Stat, Table, useLoad } from '../ui.js';

interface PeriodSummary {
  totalCost: Money;
  activeSessions: number;
  runningAgents: number;
  berthBilled: { compute: Money; model: Money; storage: Money; total: Money };
  providerDirect: { compute: Money; model: Money; total: Money };
}

interface EventEntry {
  id: string;
  event: string;
  subjectId: string;
  createdAt: string;
  data: Record<string, unknown>;
}

const FAILURES = ['agent.failed', 'workflow.failed'] as const;

export function Overview(props: { mode: Mode }) {
  const loaded = useLoad(async () => {
    const [summary, defaults, users, ...failures] = await Promise.all([
      api<PeriodSummary>(withQuery('/api/usage/summary', { period: 'month', mode: props.mode })),
      api<{ sessionDefaults: { maxCost?: Money & { period?: string } } }>('/api/session-defaults'),
      api<{ data: { userId: string; cost: Money }[] }>(withQuery('/api/usage/users', { period: 'month', limit: 5, mode: props.mode })),
      ...FAILURES.map((type) => api<{ data: EventEntry[] }>(withQuery('/api/events', { type, limit: 5, mode: props.mode }))),
    ]);
    const recent = failures
      .flatMap((page) => page.data)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt))
      .slice(0, 5);
    return { summary, budget: defaults.sessionDefaults.maxCost, recent, topUsers: users.data };
  }, props.mode);
  return (
    <>
      <PageHeader title="Overview" intro={`This month's spend, what is running now and what failed lately (${props.mode} keys).`} />
      <Loading loaded={loaded}>
        {() => {
          const { summary, budget, recent, topUsers } = loaded.data!;
          const share = budget ? Math.min(100, Math.round((summary.totalCost.amount / budget.amount) * 100)) : undefined;
          return (
            <>
              <section class="stats" aria-label="This month">
                <Stat
                  id="stat-spend"
                  label="Spend this month"
                  value={formatMoney(summary.totalCost)}
                  note={
                    budget ? (
                      <>
                        <meter min={0} max={100} value={share} aria-label="Spend against the budget per session" /> {share}% of the default budget
                        per session, {formatMoney(budget)}
                        {budget.period ? ` a ${budget.period}` : ''}
                      </>
                    ) : (
                      <>
                        No budget set: owners and admins set a default budget per session with <code>PUT /api/session-defaults</code>
                      </>
                    )
                  }
                />
                <Stat id="stat-running" label="Running agents" value={summary.runningAgents} note={<a href={href('sessions')}>Sessions and agents</a>} />
                <Stat id="stat-sessions" label="Sessions with charges" value={summary.activeSessions} />
              </section>
              <section aria-labelledby="top-users-title">
                <h2 id="top-users-title">Top users this month</h2>
                {topUsers.length === 0 ? (
                  <p class="muted">No usage this month yet: your end-users appear here by what their agents cost.</p>
                ) : (
                  <Table caption="Users by cost, highest first" head={['User', 'Cost']} captionHidden>
                    {topUsers.map((user) => (
                      <tr data-user={user.userId}>
                        <td>{user.userId}</td>
                        <td>{formatMoney(user.cost)}</td>
                      </tr>
                    ))}
                  </Table>
                )}
                <p>
                  <a href={href('usage')}>Cost by user, by model and by day</a>
                </p>
              </section>
              <section aria-labelledby="failures-title">
                <h2 id="failures-title">Recent failures</h2>
                {recent.length === 0 ? (
                  <Empty title="No failures">
                    <p>
                      Nothing has failed lately. Failed agents and workflow runs show here; the <a href={href('webhooks')}>webhooks</a> page
                      sends them to your systems as they happen.
                    </p>
                  </Empty>
                ) : (
                  <Table caption="Failures, newest first" head={['When', 'Event', 'Subject', 'Reason']} captionHidden>
                    {recent.map((entry) => (
                      <tr>
                        <td>{formatTime(entry.createdAt)}</td>
                        <td>{entry.event}</td>
                        <td>{entry.subjectId.startsWith('agt_') ? <a href={href('agents', entry.subjectId)}>{entry.subjectId}</a> : entry.subjectId}</td>
                        <td>{String((entry.data.error as { message?: string } | undefined)?.message ?? entry.data.reason ?? '')}</td>
                      </tr>
                    ))}
                  </Table>
                )}
              </section>
              {summary.totalCost.amount === 0 && (
                <Empty title="Getting started">
                  <ol>
                    <li>
                      <a href={href('keys')}>Create an API key</a> for your backend.
                    </li>
                    <li>Create a session for one of your users and start an agent in it (the README's quickstart).</li>
                    <li>Come back here: spend, running agents and failures appear as they happen.</li>
                  </ol>
                </Empty>
              )}
            </>
          );
        }}
      </Loading>
    </>
  );
}
