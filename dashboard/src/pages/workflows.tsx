import { api, formatMoney, formatTime, withQuery, type Mode, type Money } from '../api.js';
import { href } from '../route.js';
import { Code, Empty, Loading, PageHeader, Progress, Table, useLoad, usePolling } from '../ui.js';

interface Workflow {
  id: string;
  name: string;
  description: string | null;
  version: number;
  steps: { name: string; agent: string; dependsOn: string[]; retries: number; optional: boolean }[];
  archived: boolean;
  updatedAt: string;
}

interface StepRun {
  name: string;
  status: 'pending' | 'running' | 'completed' | 'failed' | 'cancelled';
  attempts: number;
  jobId: string | null;
  output: string | null;
  error: { code: string; message: string } | null;
  cost: Money;
  startedAt: string | null;
  finishedAt: string | null;
}

interface Run {
  id: string;
  workflowId: string;
  workflowVersion: number;
  userId: string;
  status: 'running' | 'completed' | 'failed' | 'partial' | 'cancelled';
  output: string | null;
  error: { code: string; message: string; step?: string } | null;
  cost: Money;
  steps: StepRun[];
  createdAt: string;
  finishedAt: string | null;
}

/** Steps that ended (completed, failed, cancelled) of all of the run's steps. */
function stepsEnded(run: Run): number {
  return run.steps.filter((step) => step.status !== 'pending' && step.status !== 'running').length;
}

export function Workflows(props: { mode: Mode }) {
  const loaded = useLoad(() => api<{ data: Workflow[] }>(withQuery('/api/workflows', { mode: props.mode, limit: 100 })), props.mode);
  return (
    <>
      <PageHeader title="Workflows" intro={`Named graphs of steps, each step an agent definition, run for a user; a step starts when the steps it depends on ended (${props.mode} keys).`} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="No workflows yet">
              <p>
                Write one with <Code>POST /v1/workflows</Code> (steps naming agent definitions and the steps they depend on) and run it with{' '}
                <Code>POST /v1/workflows/{'{id}'}/runs</Code>; each run's progress, step by step, shows here.
              </p>
            </Empty>
          ) : (
            <Table caption="Workflows" head={['Name', 'Steps', 'Version', 'Updated']} captionHidden>
              {loaded.data!.data.map((workflow) => (
                <tr>
                  <td>
                    <a href={href('workflows', workflow.id)}>{workflow.name}</a>
                    {workflow.archived && <span class="muted"> (archived)</span>}
                  </td>
                  <td>{workflow.steps.map((step) => step.name).join(' → ')}</td>
                  <td>{workflow.version}</td>
                  <td>{formatTime(workflow.updatedAt)}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}

export function WorkflowPage(props: { mode: Mode; id: string }) {
  const loaded = useLoad(async () => {
    const [workflow, runs] = await Promise.all([
      api<Workflow>(withQuery(`/api/workflows/${props.id}`, { mode: props.mode })),
      api<{ data: Run[] }>(withQuery(`/api/workflows/${props.id}/runs`, { mode: props.mode, limit: 50 })),
    ]);
    return { workflow, runs: runs.data };
  }, `${props.mode}/${props.id}`);
  // Runs under way move on their own: read them again while any is running.
  usePolling(loaded, Boolean(loaded.data?.runs.some((run) => run.status === 'running')));
  return (
    <>
      <PageHeader title="Workflow" intro={loaded.data ? loaded.data.workflow.name : props.id} />
      <p>
        <a href={href('workflows')}>All workflows</a>
      </p>
      <Loading loaded={loaded}>
        {() => {
          const { workflow, runs } = loaded.data!;
          return (
            <>
              {workflow.description && <p>{workflow.description}</p>}
              <Table caption={`Steps of version ${workflow.version}`} head={['Step', 'Agent', 'After', 'Retries', 'Optional']}>
                {workflow.steps.map((step) => (
                  <tr>
                    <td>{step.name}</td>
                    <td>{step.agent}</td>
                    <td>{step.dependsOn.join(', ') || '—'}</td>
                    <td>{step.retries}</td>
                    <td>{step.optional ? 'yes' : 'no'}</td>
                  </tr>
                ))}
              </Table>
              <h2>Runs</h2>
              {runs.length === 0 ? (
                <Empty title="Not run yet">
                  <p>
                    Start a run with <Code>POST /v1/workflows/{workflow.id}/runs</Code> and a user id; it shows here with each step's status.
                  </p>
                </Empty>
              ) : (
                <Table caption="Runs" head={['Run', 'User', 'Status', 'Progress', 'Cost', 'Started']} captionHidden>
                  {runs.map((run) => (
                    <tr data-run={run.id}>
                      <td>
                        <a href={href('workflow-runs', run.id)}>{run.id}</a>
                      </td>
                      <td>{run.userId}</td>
                      <td>
                        <span class={`status status-${run.status}`}>{run.status}</span>
                      </td>
                      <td>
                        <Progress label={`Steps ended in ${run.id}`} value={stepsEnded(run)} max={run.steps.length} unit="steps" />
                      </td>
                      <td>{formatMoney(run.cost)}</td>
                      <td>{formatTime(run.createdAt)}</td>
                    </tr>
                  ))}
                </Table>
              )}
            </>
          );
        }}
      </Loading>
    </>
  );
}

export function WorkflowRunPage(props: { mode: Mode; id: string }) {
  const loaded = useLoad(() => api<Run>(withQuery(`/api/workflow-runs/${props.id}`, { mode: props.mode })), `${props.mode}/${props.id}`);
  usePolling(loaded, loaded.data?.status === 'running');
  return (
    <>
      <PageHeader title="Workflow run" intro={props.id} />
      <Loading loaded={loaded}>
        {() => {
          const run = loaded.data!;
          return (
            <>
              <p>
                <a href={href('workflows', run.workflowId)}>The workflow</a>
              </p>
              <dl class="facts">
                <div>
                  <dt>Status</dt>
                  <dd>
                    <span class={`status status-${run.status}`} id="run-status">
                      {run.status}
                    </span>
                  </dd>
                </div>
                <div>
                  <dt>Progress</dt>
                  <dd>
                    <Progress label="Steps ended" value={stepsEnded(run)} max={run.steps.length} unit="steps" />
                  </dd>
                </div>
                <div>
                  <dt>Cost</dt>
                  <dd>{formatMoney(run.cost)}</dd>
                </div>
                <div>
                  <dt>User</dt>
                  <dd>{run.userId}</dd>
                </div>
              </dl>
              {run.error && (
                <p class="error">
                  {run.error.step ? `Step ${run.error.step}: ` : ''}
                  {run.error.code}: {run.error.message}
                </p>
              )}
              <Table caption="Steps" head={['Step', 'Status', 'Attempts', 'Cost', 'Finished', 'Output or error']}>
                {run.steps.map((step) => (
                  <tr data-step={step.name}>
                    <td>{step.name}</td>
                    <td>
                      <span class={`status status-${step.status}`}>{step.status}</span>
                    </td>
                    <td>{step.attempts}</td>
                    <td>{formatMoney(step.cost)}</td>
                    <td>{formatTime(step.finishedAt)}</td>
                    <td class="clip">{step.error ? `${step.error.code}: ${step.error.message}` : (step.output ?? '')}</td>
                  </tr>
                ))}
              </Table>
              {run.output && (
                <>
                  <h2>Output</h2>
                  <pre class="output">{run.output}</pre>
                </>
              )}
            </>
          );
        }}
      </Loading>
    </>
  );
}
