import { useState } from 'preact/hooks';
import { api, formatTime, withQuery, type Me, type Mode } from '../api.js';
import { Code, Empty, ErrorNote, Loading, PageHeader, Table, useLoad } from '../ui.js';

export function Secrets(props: { me: Me; mode: Mode }) {
  const canWrite = props.me.permissions.includes('secrets.write');
  const canDelete = props.me.permissions.includes('secrets.delete');
  const loaded = useLoad(() => api<{ data: { name: string; createdAt: string }[] }>(withQuery('/api/secrets', { mode: props.mode })), props.mode);
  const [error, setError] = useState<Error | undefined>();

  async function act(work: () => Promise<unknown>) {
    setError(undefined);
    try {
      await work();
      loaded.reload();
    } catch (failure) {
      setError(failure as Error);
    }
  }

  function save(event: Event) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    void act(async () => {
      await api(withQuery('/api/secrets', { mode: props.mode }), { method: 'POST', body: { [String(data.get('name'))]: String(data.get('value')) } });
      form.reset();
    });
  }

  return (
    <>
      <PageHeader title="Secrets" intro={`Values your agents and providers read by name (${props.mode} keys). Values are stored encrypted and never shown again.`} />
      {canWrite && (
        <form class="inline-form" onSubmit={save} aria-labelledby="secret-title" autocomplete="off">
          <h2 id="secret-title">Set a secret</h2>
          <label>
            Name <input name="name" required pattern="[A-Z_][A-Z0-9_]*" placeholder="OPENAI_API_KEY" />
          </label>
          <label>
            Value <input name="value" type="password" required />
          </label>
          <button type="submit">Save</button>
        </form>
      )}
      <ErrorNote error={error} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="No secrets yet">
              <p>Store API keys and passwords your agents need here, then refer to them by name (for example a provider's credentialRef).</p>
            </Empty>
          ) : (
            <Table caption="Secret names" head={['Name', 'Set', ...(canDelete ? [''] : [])]} captionHidden>
              {loaded.data!.data.map((secret) => (
                <tr>
                  <td>
                    <Code>{secret.name}</Code>
                  </td>
                  <td>{formatTime(secret.createdAt)}</td>
                  {canDelete && (
                    <td>
                      <button
                        type="button"
                        class="danger"
                        aria-label={`Delete ${secret.name}`}
                        onClick={() => confirm(`Delete ${secret.name}?`) && void act(() => api(withQuery(`/api/secrets/${secret.name}`, { mode: props.mode }), { method: 'DELETE' }))}
                      >
                        Delete
                      </button>
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
