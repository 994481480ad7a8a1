import { api, formatMoney, formatTime, withQuery, type Mode, type Money } from '../api.js';
import { href } from '../route.js';
import { Code, Empty, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface Schedule {
  id: string;
  name: string | null;
  agent: string;
  userId: string;
  cron: string;
  timezone: string;
  paused: boolean;
  nextRunAt: string | null;
  lastRunAt: string | null;
}

interface Execution {
  id: string;
  scheduledFor: string;
  status: string;
  finishedAt: string | null;
  agentId: string | null;
  cost: Money | null;
  error: { code: string; message: string } | null;
}

export function Schedules(props: { mode: Mode }) {
  const loaded = useLoad(() => api<{ data: Schedule[] }>(withQuery('/api/schedules', { mode: props.mode })), props.mode);
  return (
    <>
      <PageHeader title="Schedules" intro={`Agent definitions run on a cron schedule for a user (${props.mode} keys).`} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="No schedules yet">
              <p>
                Create one with <Code>POST /v1/schedules</Code> (an agent definition, a user, a cron expression and a time zone); its next run and its history
                show here.
              </p>
            </Empty>
          ) : (
            <Table caption="Schedules" head={['Name', 'Agent', 'User', 'When', 'Next run', 'Last run']} captionHidden>
              {loaded.data!.data.map((schedule) => (
                <tr>
                  <td>
                    <a href={href('schedules', schedule.id)}>{schedule.name ?? schedule.id}</a>
                  </td>
                  <td>{schedule.agent}</td>
                  <td>{schedule.userId}</td>
                  <td>
                    <Code>{schedule.cron}</Code> {schedule.timezone}
                  </td>
                  <td>{schedule.paused ? 'paused' : formatTime(schedule.nextRunAt)}</td>
                  <td>{formatTime(schedule.lastRunAt)}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}

export function ScheduleHistory(props: { mode: Mode; id: string }) {
  const loaded = useLoad(() => api<{ data: Execution[] }>(withQuery(`/api/schedules/${props.id}/history`, { mode: props.mode })), `${props.mode}/${props.id}`);
  return (
    <>
      <PageHeader title="Schedule history" intro={props.id} />
      <p>
        <a href={href('schedules')}>All schedules</a>
      </p>
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="Not run yet">
              <p>Each time the schedule comes due, its run shows here with its status and cost.</p>
            </Empty>
          ) : (
            <Table caption="Runs" head={['Due', 'Status', 'Finished', 'Agent', 'Cost', 'Error']} captionHidden>
              {loaded.data!.data.map((execution) => (
                <tr>
                  <td>{formatTime(execution.scheduledFor)}</td>
                  <td>{execution.status}</td>
                  <td>{formatTime(execution.finishedAt)}</td>
                  <td>{execution.agentId ? <a href={href('agents', execution.agentId)}>{execution.agentId}</a> : '—'}</td>
                  <td>{formatMoney(execution.cost)}</td>
                  <td>{execution.error ? `${execution.error.code}: ${execution.error.message}` : ''}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}
