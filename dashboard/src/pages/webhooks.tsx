import { useState } from 'preact/hooks';
import { api, formatTime, withQuery, type Me, type Mode } from '../api.js';
import { href } from '../route.js';
import { Code, Empty, ErrorNote, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface Webhook {
  id: string;
  url: string;
  events: string[];
  createdAt: string;
}

interface Delivery {
  id: string;
  event: string;
  state: string;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  lastAttemptAt: string | null;
}

export function Webhooks(props: { me: Me; mode: Mode }) {
  const loaded = useLoad(() => api<{ data: Webhook[] }>(withQuery('/api/webhooks', { mode: props.mode })), props.mode);
  return (
    <>
      <PageHeader title="Webhooks" intro={`Berth posts lifecycle events (agents, runs, workflows) to these URLs, signed (${props.mode} keys).`} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="No webhooks yet">
              <p>
                Add one with <Code>POST /v1/webhooks</Code> (or <Code>/api/webhooks</Code> as an owner or admin) to hear about finished and failed agents without
                polling; its deliveries and their retries show here.
              </p>
            </Empty>
          ) : (
            <Table caption="Webhooks" head={['URL', 'Events', 'Created']} captionHidden>
              {loaded.data!.data.map((hook) => (
                <tr>
                  <td>
                    <a href={href('webhooks', hook.id)}>{hook.url}</a>
                  </td>
                  <td>{hook.events.join(', ')}</td>
                  <td>{formatTime(hook.createdAt)}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}

export function WebhookDeliveries(props: { me: Me; mode: Mode; id: string }) {
  const canManage = props.me.permissions.includes('webhooks.manage');
  const loaded = useLoad(async () => {
    const [hook, deliveries] = await Promise.all([
      api<Webhook>(withQuery(`/api/webhooks/${props.id}`, { mode: props.mode })),
      api<{ data: Delivery[] }>(withQuery(`/api/webhooks/${props.id}/deliveries`, { mode: props.mode })),
    ]);
    return { hook, deliveries: deliveries.data };
  }, `${props.mode}/${props.id}`);
  const [note, setNote] = useState<string | undefined>();
  const [error, setError] = useState<Error | undefined>();

  async function resend(delivery: Delivery) {
    setError(undefined);
    try {
      const result = await api<{ attempt: number; delivered: boolean; status: number | null; error: string | null }>(
        withQuery(`/api/webhooks/${props.id}/deliveries/${delivery.id}/resend`, { mode: props.mode }),
        { method: 'POST' },
      );
      setNote(
        result.delivered
          ? `Resent ${delivery.event} (attempt ${result.attempt}): delivered (HTTP ${result.status}).`
          : `Resent ${delivery.event} (attempt ${result.attempt}): not delivered: ${result.error ?? `HTTP ${result.status}`}.`,
      );
      loaded.reload();
    } catch (failure) {
      setError(failure as Error);
    }
  }

  async function sendTest() {
    setError(undefined);
    try {
      const result = await api<{ delivered: boolean; status: number | null; error: string | null }>(withQuery(`/api/webhooks/${props.id}/test`, { mode: props.mode }), { method: 'POST' });
      setNote(result.delivered ? `Delivered (HTTP ${result.status}).` : `Not delivered: ${result.error ?? `HTTP ${result.status}`}.`);
      loaded.reload();
    } catch (failure) {
      setError(failure as Error);
    }
  }

  return (
    <>
      <PageHeader title="Webhook deliveries" intro={loaded.data ? loaded.data.hook.url : props.id}>
        {canManage && (
          <button type="button" onClick={() => void sendTest()}>
            Send a test event
          </button>
        )}
      </PageHeader>
      <p>
        <a href={href('webhooks')}>All webhooks</a>
      </p>
      {note && <p role="status">{note}</p>}
      <ErrorNote error={error} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.deliveries.length === 0 ? (
            <Empty title="No deliveries yet">
              <p>Each event this webhook subscribes to is delivered and listed here with its attempts.</p>
            </Empty>
          ) : (
            <Table caption="Deliveries" head={['Event', 'State', 'Attempts', 'Last status', 'Last attempt', ...(canManage ? [''] : [])]} captionHidden>
              {loaded.data!.deliveries.map((delivery) => (
                <tr data-delivery={delivery.id}>
                  <td>{delivery.event}</td>
                  <td>{delivery.state}</td>
                  <td>{delivery.attempts}</td>
                  <td>{delivery.lastStatus ?? delivery.lastError ?? '—'}</td>
                  <td>{formatTime(delivery.lastAttemptAt)}</td>
                  {canManage && (
                    <td>
                      {/* Pending deliveries are the sender's until their retries end. */}
                      {(delivery.state === 'succeeded' || delivery.state === 'failed') && (
                        <button type="button" onClick={() => void resend(delivery)} aria-label={`Resend ${delivery.event} delivery ${delivery.id}`}>
                          Resend
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
