import { api, formatTime, withQuery, type Mode } from '../api.js';
import { Code, Empty, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface ProviderConfig {
  provider: string;
  enabled: boolean;
  credentialRef: string | null;
  config: Record<string, unknown>;
  createdAt: string;
}

export function Providers(props: { mode: Mode }) {
  const loaded = useLoad(() => api<{ data: ProviderConfig[] }>(withQuery('/api/providers', { mode: props.mode })), props.mode);
  return (
    <>
      <PageHeader title="BYOI providers" intro={`Your own model keys and compute, used instead of Berth's (${props.mode} keys). Credentials are secrets, named here, never shown.`} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="Berth's own providers are in use">
              <p>
                To run on your own model keys or compute, store the credential as a <a href="#/secrets">secret</a> and configure the provider with{' '}
                <Code>PUT /v1/providers/{'{provider}'}</Code> (owners and admins: <Code>/api/providers</Code>); docs/byoi.md explains each.
              </p>
            </Empty>
          ) : (
            <Table caption="Providers" head={['Provider', 'Enabled', 'Credential', 'Settings', 'Configured']} captionHidden>
              {loaded.data!.data.map((provider) => (
                <tr>
                  <td>{provider.provider}</td>
                  <td>{provider.enabled ? 'yes' : 'no'}</td>
                  <td>{provider.credentialRef ? <Code>{provider.credentialRef}</Code> : '—'}</td>
                  <td>
                    <Code>{JSON.stringify(provider.config)}</Code>
                  </td>
                  <td>{formatTime(provider.createdAt)}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}
