import { api, formatTime } from '../api.js';
import { Code, Empty, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface AuditEntry {
  id: string;
  actor: { type: 'user' | 'system'; id: string };
  action: string;
  target: { type: string; id: string };
  details: Record<string, unknown>;
  at: string;
}

export function Audit() {
  const loaded = useLoad(() => api<{ data: AuditEntry[]; hasMore: boolean }>('/api/audit-log?limit=100'), 'audit');
  return (
    <>
      <PageHeader title="Audit log" intro="Who changed what in this organization, newest first: keys, the team, plans and budgets, webhooks, providers and secrets (names, never values)." />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="Nothing recorded yet">
              <p>Changes appear here as soon as someone creates a key, invites a person or configures a webhook.</p>
            </Empty>
          ) : (
            <Table caption="Audit log" head={['When', 'Who', 'Action', 'Target', 'Details']} captionHidden>
              {loaded.data!.data.map((entry) => (
                <tr>
                  <td>{formatTime(entry.at)}</td>
                  <td>
                    <Code>{entry.actor.id}</Code>
                  </td>
                  <td>{entry.action}</td>
                  <td>
                    {entry.target.type} <Code>{entry.target.id}</Code>
                  </td>
                  <td>
                    <Code>{JSON.stringify(entry.details)}</Code>
                  </td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}
