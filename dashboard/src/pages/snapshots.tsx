import { useState } from 'preact/hooks';
import { api, formatTime, withQuery, type Me, type Mode } from '../api.js';
import { href } from '../route.js';
import { Code, Empty, ErrorNote, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface Snapshot {
  id: string;
  agentId: string;
  sessionId: string;
  provider: string;
  type: 'pause' | 'manual';
  sizeBytes: number;
  state: 'creating' | 'ready' | 'failed' | 'deleting';
  level?: 'native' | 'filesystem';
  createdAt: string;
}

const STATES = ['creating', 'ready', 'failed', 'deleting'] as const;

/** Bytes as people read them: decimal units, as the usage reports' gigabytes. */
export function formatBytes(bytes: number): string {
  if (bytes === 0) return '0 B';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  const power = Math.min(units.length - 1, Math.floor(Math.log10(bytes) / 3));
  const value = bytes / 1000 ** power;
  return `${power === 0 ? value : value.toFixed(1)} ${units[power]}`;
}

export function Snapshots(props: { me: Me; mode: Mode }) {
  const [state, setState] = useState('');
  return (
    <>
      <PageHeader title="Snapshots" intro={`Checkpoints of paused agents: their files (and, where the provider can, their processes and memory), resumable as new agents (${props.mode} keys).`}>
        <label>
          State{' '}
          <select value={state} onChange={(event) => setState((event.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            {STATES.map((value) => (
              <option value={value}>{value}</option>
            ))}
          </select>
        </label>
      </PageHeader>
      <SnapshotList me={props.me} mode={props.mode} query={{ state: state || undefined }} />
    </>
  );
}

/** The snapshots the query picks, with a resume button for those who run agents; on the snapshots page and an agent's page. */
export function SnapshotList(props: { me: Me; mode: Mode; query: { state?: string | undefined; agentId?: string } }) {
  const canResume = props.me.permissions.includes('sessions.manage');
  const loaded = useLoad(() => api<{ data: Snapshot[] }>(withQuery('/api/snapshots', { ...props.query, mode: props.mode })), `${props.mode}/${JSON.stringify(props.query)}`);
  const [resumed, setResumed] = useState<{ snapshotId: string; agentId: string; resumeLevel: string } | undefined>();
  const [error, setError] = useState<Error | undefined>();

  async function resume(snapshot: Snapshot) {
    setError(undefined);
    try {
      const answer = await api<{ agentId: string; resumeLevel: string }>(withQuery(`/api/snapshots/${snapshot.id}/resume`, { mode: props.mode }), { method: 'POST', body: {} });
      setResumed({ snapshotId: snapshot.id, ...answer });
    } catch (failure) {
      setError(failure as Error);
    }
  }

  return (
    <>
      {resumed && (
        <p role="status" id="snapshot-resumed">
          Resumed {resumed.snapshotId} ({resumed.resumeLevel}) as a new agent: <a href={href('agents', resumed.agentId)}>{resumed.agentId}</a>
        </p>
      )}
      <ErrorNote error={error} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="No snapshots">
              <p>
                Pausing an agent (<Code>POST /v1/agents/{'{id}'}/pause</Code>) checkpoints it into a snapshot and frees its compute; resume it later, here or with{' '}
                <Code>POST /v1/snapshots/{'{id}'}/resume</Code>.
              </p>
            </Empty>
          ) : (
            <Table caption="Snapshots, newest first" head={['Snapshot', 'Agent', 'State', 'Size', 'Kind', 'Taken', ...(canResume ? [''] : [])]} captionHidden>
              {loaded.data!.data.map((snapshot) => (
                <tr data-snapshot={snapshot.id}>
                  <td>
                    <Code>{snapshot.id}</Code>
                  </td>
                  <td>
                    <a href={href('agents', snapshot.agentId)}>{snapshot.agentId}</a>
                  </td>
                  <td>
                    <span class={`status status-${snapshot.state}`}>{snapshot.state}</span>
                  </td>
                  <td data-bytes={snapshot.sizeBytes}>{formatBytes(snapshot.sizeBytes)}</td>
                  <td>
                    {snapshot.type}, {snapshot.level ?? '—'} on {snapshot.provider}
                  </td>
                  <td>{formatTime(snapshot.createdAt)}</td>
                  {canResume && (
                    <td>
                      {snapshot.state === 'ready' && (
                        <button type="button" onClick={() => void resume(snapshot)} aria-label={`Resume ${snapshot.id} as a new agent`}>
                          Resume
                        </button>
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}
