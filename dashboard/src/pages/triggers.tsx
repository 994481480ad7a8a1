import { api, formatTime, withQuery, type Mode } from '../api.js';
import { href } from '../route.js';
import { Code, Empty, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface Trigger {
  id: string;
  name: string | null;
  type: string;
  agent: string;
  userId: string;
  url: string;
  secret: string;
  createdAt: string;
  lastFiredAt: string | null;
}

export function Triggers(props: { mode: Mode }) {
  const loaded = useLoad(() => api<{ data: Trigger[] }>(withQuery('/api/triggers', { mode: props.mode })), props.mode);
  return (
    <>
      <PageHeader title="Triggers" intro={`Public URLs that run an agent definition for a user on each signed request, as a job (${props.mode} keys).`} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="No triggers yet">
              <p>
                Create one with <Code>POST /v1/triggers</Code> (an agent definition, a user and <Code>type: "webhook"</Code>): it answers with a fire URL and a
                signing secret, shown once. Point a form, a CRM or a ticket system at the URL; each fire runs the agent with the request's body.
              </p>
            </Empty>
          ) : (
            <Table caption="Triggers" head={['Name', 'Agent', 'User', 'Fire URL', 'Secret', 'Last fired', 'Created']} captionHidden>
              {loaded.data!.data.map((trigger) => (
                <tr data-trigger={trigger.id}>
                  <td>{trigger.name ?? trigger.id}</td>
                  <td>
                    <a href={href('definitions', trigger.agent)}>{trigger.agent}</a>
                  </td>
                  <td>{trigger.userId}</td>
                  <td>
                    <Code>{trigger.url}</Code>
                  </td>
                  <td>
                    <Code>{trigger.secret}</Code>
                  </td>
                  <td>{trigger.lastFiredAt ? formatTime(trigger.lastFiredAt) : 'never'}</td>
                  <td>{formatTime(trigger.createdAt)}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}
