import { api, formatMoney, formatTime, withQuery, type Mode, type Money } from '../api.js';
import { href } from '../route.js';
import { Code, Empty, Loading, PageHeader, Progress, Table, useLoad, usePolling } from '../ui.js';

interface Fleet {
  id: string;
  name: string | null;
  agent: string;
  sessionId: string;
  status: string;
  reason: string | null;
  concurrency: number;
  costCap: Money | null;
  total: number;
  completed: number;
  failed: number;
  cancelled: number;
  running: number;
  pending: number;
  cost: Money | null;
  createdAt: string;
}

interface Item {
  id: string;
  index: number;
  input: string | Record<string, unknown>;
  status: string;
  output: string | null;
  error: { code: string; message: string } | null;
  cost: Money | null;
  finishedAt: string | null;
}

const ended = (fleet: Fleet) => fleet.completed + fleet.failed + fleet.cancelled;

/** The counts of a fleet as words, the same on the list and on its page. */
function counts(fleet: Fleet): string {
  return `${fleet.completed} completed, ${fleet.failed} failed, ${fleet.cancelled} cancelled, ${fleet.running} running, ${fleet.pending} pending`;
}

export function Fleets(props: { mode: Mode }) {
  const loaded = useLoad(() => api<{ data: Fleet[] }>(withQuery('/api/fleets', { mode: props.mode, limit: 100 })), props.mode);
  usePolling(loaded, Boolean(loaded.data?.data.some((fleet) => fleet.status === 'running')));
  return (
    <>
      <PageHeader title="Fleets" intro={`One agent definition run over many items, a bounded number at a time, in one session (${props.mode} keys).`} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="No fleets yet">
              <p>
                Start one with <Code>POST /v1/fleets</Code> (an agent definition, a session and up to thousands of items, with a prompt template); its progress,
                item by item, shows here.
              </p>
            </Empty>
          ) : (
            <Table caption="Fleets" head={['Fleet', 'Agent', 'Status', 'Progress', 'Counts', 'Cost', 'Started']} captionHidden>
              {loaded.data!.data.map((fleet) => (
                <tr data-fleet={fleet.id}>
                  <td>
                    <a href={href('fleets', fleet.id)}>{fleet.name ?? fleet.id}</a>
                  </td>
                  <td>{fleet.agent}</td>
                  <td>
                    <span class={`status status-${fleet.status}`}>{fleet.status}</span>
                  </td>
                  <td>
                    <Progress label={`Items ended in ${fleet.name ?? fleet.id}`} value={ended(fleet)} max={fleet.total} unit="items" />
                  </td>
                  <td class="fleet-counts">{counts(fleet)}</td>
                  <td>{formatMoney(fleet.cost)}</td>
                  <td>{formatTime(fleet.createdAt)}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}

export function FleetPage(props: { mode: Mode; id: string }) {
  const loaded = useLoad(async () => {
    const [fleet, items] = await Promise.all([
      api<Fleet>(withQuery(`/api/fleets/${props.id}`, { mode: props.mode })),
      api<{ data: Item[] }>(withQuery(`/api/fleets/${props.id}/items`, { mode: props.mode, limit: 100 })),
    ]);
    return { fleet, items: items.data };
  }, `${props.mode}/${props.id}`);
  usePolling(loaded, loaded.data?.fleet.status === 'running');
  return (
    <>
      <PageHeader title="Fleet" intro={loaded.data ? (loaded.data.fleet.name ?? props.id) : props.id} />
      <p>
        <a href={href('fleets')}>All fleets</a>
      </p>
      <Loading loaded={loaded}>
        {() => {
          const { fleet, items } = loaded.data!;
          return (
            <>
              <dl class="facts">
                <div>
                  <dt>Status</dt>
                  <dd>
                    <span class={`status status-${fleet.status}`} id="fleet-status">
                      {fleet.status}
                    </span>
                    {fleet.reason ? ` (${fleet.reason})` : ''}
                  </dd>
                </div>
                <div>
                  <dt>Progress</dt>
                  <dd>
                    <Progress label="Items ended" value={ended(fleet)} max={fleet.total} unit="items" />
                  </dd>
                </div>
                <div>
                  <dt>Items</dt>
                  <dd id="fleet-counts">{counts(fleet)}</dd>
                </div>
                <div>
                  <dt>Cost</dt>
                  <dd>
                    {formatMoney(fleet.cost)}
                    {fleet.costCap ? ` of at most ${formatMoney(fleet.costCap)}` : ''}
                  </dd>
                </div>
                <div>
                  <dt>Session</dt>
                  <dd>
                    <a href={href('sessions', fleet.sessionId)}>{fleet.sessionId}</a>
                  </dd>
                </div>
              </dl>
              <Table caption="Items" head={['#', 'Input', 'Status', 'Cost', 'Finished', 'Output or error']}>
                {items.map((item) => (
                  <tr data-item={item.index}>
                    <td>{item.index}</td>
                    <td class="clip">{typeof item.input === 'string' ? item.input : JSON.stringify(item.input)}</td>
                    <td>
                      <span class={`status status-${item.status}`}>{item.status}</span>
                    </td>
                    <td>{formatMoney(item.cost)}</td>
                    <td>{formatTime(item.finishedAt)}</td>
                    <td class="clip">{item.error ? `${item.error.code}: ${item.error.message}` : (item.output ?? '')}</td>
                  </tr>
                ))}
              </Table>
            </>
          );
        }}
      </Loading>
    </>
  );
}
