import { useState } from 'preact/hooks';
import { api, formatTime, withQuery, type Me, type Mode } from '../api.js';
import { Code, Empty, ErrorNote, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface ProviderConfig {
  provider: string;
  enabled: boolean;
  credentialRef: string | null;
  config: Record<string, unknown> | null;
  createdAt: string;
}

/** What the form holds: the provider's name, the secret its credential is in, its settings as JSON text. */
interface Draft {
  provider: string;
  credentialRef: string;
  config: string;
  enabled: boolean;
}

const EMPTY: Draft = { provider: '', credentialRef: '', config: '', enabled: true };

export function Providers(props: { me: Me; mode: Mode }) {
  const canManage = props.me.permissions.includes('providers.manage');
  const loaded = useLoad(async () => {
    const [providers, secrets] = await Promise.all([
      api<{ data: ProviderConfig[] }>(withQuery('/api/providers', { mode: props.mode })),
      api<{ data: { name: string }[] }>(withQuery('/api/secrets', { mode: props.mode })),
    ]);
    return { providers: providers.data, secrets: secrets.data.map((secret) => secret.name) };
  }, props.mode);
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [editing, setEditing] = useState(false);
  const [note, setNote] = useState<string | undefined>();
  const [error, setError] = useState<Error | undefined>();

  async function act(work: () => Promise<string>) {
    setError(undefined);
    setNote(undefined);
    try {
      setNote(await work());
      loaded.reload();
    } catch (failure) {
      setError(failure as Error);
    }
  }

  function save(event: Event) {
    event.preventDefault();
    let config: unknown = null;
    if (draft.config.trim()) {
      try {
        config = JSON.parse(draft.config);
      } catch {
        setError(new Error('Settings: not JSON. Write an object such as {"baseUrl": "https://llm.example.com/v1"}, or leave it empty.'));
        return;
      }
    }
    void act(async () => {
      await api(withQuery(`/api/providers/${encodeURIComponent(draft.provider)}`, { mode: props.mode }), {
        method: 'PUT',
        body: { credentialRef: draft.credentialRef, config, enabled: draft.enabled },
      });
      const saved = draft.provider;
      setDraft(EMPTY);
      setEditing(false);
      return `${saved} is configured: ${draft.enabled ? 'it runs on your own account from the next run or provisioning' : 'kept, but disabled (managed)'}.`;
    });
  }

  function edit(provider: ProviderConfig) {
    setEditing(true);
    setDraft({ provider: provider.provider, credentialRef: provider.credentialRef ?? '', config: provider.config ? JSON.stringify(provider.config) : '', enabled: provider.enabled });
    document.getElementById('provider-form-title')?.scrollIntoView();
  }

  function remove(provider: string) {
    if (!confirm(`Remove the configuration of ${provider}? Future agents run on Berth's own ${provider}.`)) return;
    void act(async () => {
      await api(withQuery(`/api/providers/${encodeURIComponent(provider)}`, { mode: props.mode }), { method: 'DELETE' });
      return `${provider} is managed by Berth again.`;
    });
  }

  return (
    <>
      <PageHeader title="BYOI providers" intro={`Your own model keys and compute, used instead of Berth's (${props.mode} keys). Credentials are secrets, named here, never shown.`} />
      {note && <p role="status">{note}</p>}
      <ErrorNote error={error} />
      <Loading loaded={loaded}>
        {() => {
          const { providers, secrets } = loaded.data!;
          return (
            <>
              {canManage &&
                (secrets.length === 0 ? (
                  <p class="hint">
                    To configure a provider, first store its credential as a <a href="#/secrets">secret</a>; then pick it here.
                  </p>
                ) : (
                  <form class="inline-form" onSubmit={save} aria-labelledby="provider-form-title" autocomplete="off">
                    <h2 id="provider-form-title">{editing ? `Change ${draft.provider}` : 'Configure a provider'}</h2>
                    <label>
                      Provider
                      <input
                        name="provider"
                        required
                        list="provider-names"
                        placeholder="openai"
                        value={draft.provider}
                        readOnly={editing}
                        onInput={(event) => setDraft({ ...draft, provider: (event.target as HTMLInputElement).value })}
                      />
                    </label>
                    <datalist id="provider-names">
                      {['openai', 'anthropic', 'remote', 'kubernetes'].map((name) => (
                        <option value={name} />
                      ))}
                    </datalist>
                    <label>
                      Credential secret
                      <select name="credentialRef" required value={draft.credentialRef} onChange={(event) => setDraft({ ...draft, credentialRef: (event.target as HTMLSelectElement).value })}>
                        <option value="">choose…</option>
                        {secrets.map((name) => (
                          <option value={name}>{name}</option>
                        ))}
                      </select>
                    </label>
                    <label>
                      Settings (JSON)
                      <input
                        name="config"
                        placeholder='{"baseUrl": "https://llm.example.com/v1"}'
                        value={draft.config}
                        onInput={(event) => setDraft({ ...draft, config: (event.target as HTMLInputElement).value })}
                      />
                    </label>
                    <label class="checkbox">
                      <input type="checkbox" name="enabled" checked={draft.enabled} onChange={(event) => setDraft({ ...draft, enabled: (event.target as HTMLInputElement).checked })} /> Enabled
                    </label>
                    <button type="submit">Save provider</button>
                    {editing && (
                      <button type="button" onClick={() => (setEditing(false), setDraft(EMPTY))}>
                        Cancel
                      </button>
                    )}
                  </form>
                ))}
              {providers.length === 0 ? (
                <Empty title="Berth's own providers are in use">
                  <p>
                    To run on your own model keys or compute, store the credential as a <a href="#/secrets">secret</a> and configure the provider
                    {canManage ? ' above' : <> (owners and admins), or with <Code>PUT /v1/providers/{'{provider}'}</Code></>}; docs/byoi.md explains each.
                  </p>
                </Empty>
              ) : (
                <Table caption="Providers" head={['Provider', 'Enabled', 'Credential', 'Settings', 'Configured', ...(canManage ? [''] : [])]} captionHidden>
                  {providers.map((provider) => (
                    <tr data-provider={provider.provider}>
                      <td>{provider.provider}</td>
                      <td>{provider.enabled ? 'yes' : 'no'}</td>
                      <td>{provider.credentialRef ? <Code>{provider.credentialRef}</Code> : '—'}</td>
                      <td>
                        <Code>{JSON.stringify(provider.config ?? {})}</Code>
                      </td>
                      <td>{formatTime(provider.createdAt)}</td>
                      {canManage && (
                        <td class="row-actions">
                          <button type="button" onClick={() => edit(provider)} aria-label={`Change ${provider.provider}`}>
                            Change
                          </button>{' '}
                          <button type="button" class="danger" onClick={() => remove(provider.provider)} aria-label={`Remove ${provider.provider}`}>
                            Remove
                          </button>
                        </td>
                      )}
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
