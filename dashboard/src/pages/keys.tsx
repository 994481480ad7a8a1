import { useState } from 'preact/hooks';
import { api, formatTime, type Me } from '../api.js';
import { Code, Empty, ErrorNote, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface ApiKey {
  id: string;
  prefix: string;
  label: string;
  mode: 'live' | 'test';
  createdBy: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export function Keys(props: { me: Me }) {
  const canManage = props.me.permissions.includes('keys.manage');
  const loaded = useLoad(() => api<{ data: ApiKey[] }>('/api/keys'), 'keys');
  const [created, setCreated] = useState<(ApiKey & { key: string }) | undefined>();
  const [error, setError] = useState<Error | undefined>();
  const [busy, setBusy] = useState(false);

  async function create(event: Event) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    setBusy(true);
    setError(undefined);
    try {
      setCreated(await api<ApiKey & { key: string }>('/api/keys', { method: 'POST', body: { label: String(data.get('label')), mode: String(data.get('mode')) } }));
      form.reset();
      loaded.reload();
    } catch (failure) {
      setError(failure as Error);
    } finally {
      setBusy(false);
    }
  }

  async function revoke(key: ApiKey) {
    if (!confirm(`Revoke ${key.label || key.prefix}? Requests with it fail from now on.`)) return;
    try {
      await api(`/api/keys/${key.id}`, { method: 'DELETE' });
      loaded.reload();
    } catch (failure) {
      setError(failure as Error);
    }
  }

  return (
    <>
      <PageHeader title="API keys" intro="Your backend calls the data plane (/v1) with these. Live keys run real sandboxes and are billed; test keys run against mocks." />
      {canManage && (
        <form class="inline-form" onSubmit={create} aria-labelledby="create-key-title">
          <h2 id="create-key-title">Create a key</h2>
          <label>
            Label <input name="label" required maxLength={200} placeholder="backend" />
          </label>
          <label>
            Mode{' '}
            <select name="mode">
              <option value="live">live</option>
              <option value="test">test</option>
            </select>
          </label>
          <button type="submit" disabled={busy}>
            Create key
          </button>
        </form>
      )}
      <ErrorNote error={error} />
      {created && (
        <section class="reveal" aria-labelledby="new-key-title" role="status">
          <h2 id="new-key-title">Your new key: copy it now</h2>
          <p>This is the only time the full key is shown; Berth keeps only its hash.</p>
          <p>
            <Code>
              <span id="new-key">{created.key}</span>
            </Code>{' '}
            <button type="button" onClick={() => void navigator.clipboard?.writeText(created.key)}>
              Copy
            </button>{' '}
            <button type="button" onClick={() => setCreated(undefined)}>
              Done
            </button>
          </p>
        </section>
      )}
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="No API keys yet">
              <p>
                {canManage
                  ? 'Create a key above, put it in your backend’s configuration, and call /v1 with it as a Bearer token.'
                  : 'An owner or admin creates keys; ask one of them for a key for your backend.'}
              </p>
            </Empty>
          ) : (
            <Table caption="API keys" head={['Label', 'Key', 'Mode', 'Created', 'Last used', 'State', ...(canManage ? [''] : [])]}>
              {loaded.data!.data.map((key) => (
                <tr>
                  <td>{key.label || '—'}</td>
                  <td>
                    <Code>{key.prefix}…</Code>
                  </td>
                  <td>{key.mode}</td>
                  <td>{formatTime(key.createdAt)}</td>
                  <td>{formatTime(key.lastUsedAt)}</td>
                  <td>{key.revokedAt ? `revoked ${formatTime(key.revokedAt)}` : 'active'}</td>
                  {canManage && (
                    <td>
                      {!key.revokedAt && (
                        <button type="button" class="danger" onClick={() => void revoke(key)} aria-label={`Revoke ${key.label || key.prefix}`}>
                          Revoke
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
