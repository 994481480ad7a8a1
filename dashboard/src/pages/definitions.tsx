import { useState } from 'preact/hooks';
import { api, formatTime, withQuery, type Me, type Mode } from '../api.js';
import { href } from '../route.js';
import { Code, Empty, ErrorNote, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface DefinitionFields {
  description?: string;
  compute: string;
  model?: string;
  systemPrompt?: string;
  tools: string[];
  browser: boolean;
  timeout: string;
  config: Record<string, number>;
}

interface Definition extends DefinitionFields {
  id: string;
  name: string;
  version: number;
  archived: boolean;
  createdAt: string;
  updatedAt: string;
}

interface VersionEntry {
  version: number;
  createdAt: string;
  changelog: string;
  createdBy: string;
}

interface VersionDetail extends DefinitionFields {
  version: number;
  current: boolean;
}

/** The fields two versions are compared by, in the order shown, each as text. */
const FIELDS: { label: string; text: (fields: DefinitionFields) => string }[] = [
  { label: 'Description', text: (fields) => fields.description ?? '—' },
  { label: 'Model', text: (fields) => fields.model ?? 'platform default' },
  { label: 'System prompt', text: (fields) => fields.systemPrompt ?? '—' },
  { label: 'Tools', text: (fields) => (fields.tools.length ? fields.tools.join(', ') : 'none') },
  { label: 'Compute', text: (fields) => fields.compute },
  { label: 'Browser', text: (fields) => (fields.browser ? 'yes' : 'no') },
  { label: 'Timeout', text: (fields) => fields.timeout },
  {
    label: 'Model settings',
    text: (fields) =>
      Object.entries(fields.config)
        .map(([name, value]) => `${name} ${value}`)
        .join(', ') || 'defaults',
  },
];

export function Definitions(props: { mode: Mode }) {
  const loaded = useLoad(() => api<{ data: Definition[] }>(withQuery('/api/agent-definitions', { mode: props.mode, includeArchived: 'true' })), props.mode);
  return (
    <>
      <PageHeader title="Agent definitions" intro={`Reusable agent configurations, versioned: every change is a new version, and any version can be made current again (${props.mode} keys).`} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="No agent definitions yet">
              <p>
                Write one with <Code>POST /v1/agent-definitions</Code> (a name, a model, a system prompt and tools); schedules, triggers, workflows, fleets and
                channels run agents from definitions, and each update shows here as a version you can compare and roll back to.
              </p>
            </Empty>
          ) : (
            <Table caption="Agent definitions" head={['Name', 'Version', 'Model', 'Tools', 'Updated']} captionHidden>
              {loaded.data!.data.map((definition) => (
                <tr>
                  <td>
                    <a href={href('definitions', definition.id)}>{definition.name}</a>
                    {definition.archived && <span class="muted"> (archived)</span>}
                  </td>
                  <td>{definition.version}</td>
                  <td>{definition.model ?? 'platform default'}</td>
                  <td>{definition.tools.join(', ') || 'none'}</td>
                  <td>{formatTime(definition.updatedAt)}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}

export function DefinitionPage(props: { me: Me; mode: Mode; id: string }) {
  const canRollBack = props.me.permissions.includes('agentResources.manage');
  const base = `/api/agent-definitions/${props.id}`;
  const loaded = useLoad(async () => {
    const [definition, versions] = await Promise.all([
      api<Definition>(withQuery(base, { mode: props.mode })),
      api<{ data: VersionEntry[] }>(withQuery(`${base}/versions`, { mode: props.mode })),
    ]);
    return { definition, versions: versions.data };
  }, `${props.mode}/${props.id}`);
  const [note, setNote] = useState<string | undefined>();
  const [error, setError] = useState<Error | undefined>();

  async function rollBack(version: number) {
    if (!confirm(`Make version ${version} current? Agents created from now on get it; later versions are kept.`)) return;
    setError(undefined);
    try {
      await api(withQuery(`${base}/rollback`, { mode: props.mode }), { method: 'POST', body: { version } });
      setNote(`Version ${version} is current now.`);
      loaded.reload();
    } catch (failure) {
      setError(failure as Error);
    }
  }

  return (
    <>
      <PageHeader title="Agent definition" intro={loaded.data ? loaded.data.definition.name : props.id} />
      <p>
        <a href={href('definitions')}>All agent definitions</a>
      </p>
      {note && <p role="status">{note}</p>}
      <ErrorNote error={error} />
      <Loading loaded={loaded}>
        {() => {
          const { definition, versions } = loaded.data!;
          return (
            <>
              <dl class="facts">
                <div>
                  <dt>Current version</dt>
                  <dd id="definition-version">{definition.version}</dd>
                </div>
                <div>
                  <dt>Model</dt>
                  <dd>{definition.model ?? 'platform default'}</dd>
                </div>
                <div>
                  <dt>Tools</dt>
                  <dd>{definition.tools.join(', ') || 'none'}</dd>
                </div>
                <div>
                  <dt>State</dt>
                  <dd>{definition.archived ? 'archived: no new agents' : 'in use'}</dd>
                </div>
              </dl>
              <Table caption="Versions" head={['Version', 'Written', 'Changes', 'By key', ...(canRollBack && !definition.archived ? [''] : [])]}>
                {versions.map((entry) => (
                  <tr>
                    <td>
                      {entry.version}
                      {entry.version === definition.version && <span class="tag">current</span>}
                    </td>
                    <td>{formatTime(entry.createdAt)}</td>
                    <td>{entry.changelog}</td>
                    <td>
                      <Code>{entry.createdBy}</Code>
                    </td>
                    {canRollBack && !definition.archived && (
                      <td>
                        {entry.version !== definition.version && (
                          <button type="button" onClick={() => void rollBack(entry.version)}>
                            Roll back to version {entry.version}
                          </button>
                        )}
                      </td>
                    )}
                  </tr>
                ))}
              </Table>
              <VersionDiff mode={props.mode} base={base} versions={versions.map((entry) => entry.version)} current={definition.version} />
            </>
          );
        }}
      </Loading>
    </>
  );
}

/** Two versions side by side, the fields that differ marked (in words as well as color). */
function VersionDiff(props: { mode: Mode; base: string; versions: number[]; current: number }) {
  const newest = props.versions[0]!;
  const [left, setLeft] = useState(() => props.versions.find((version) => version !== props.current) ?? newest);
  const [right, setRight] = useState(props.current);
  const loaded = useLoad(
    () => Promise.all([left, right].map((version) => api<VersionDetail>(withQuery(`${props.base}/versions/${version}`, { mode: props.mode })))),
    `${props.mode}/${props.base}/${left}/${right}/${props.current}`,
  );
  const picker = (label: string, value: number, set: (version: number) => void) => (
    <label>
      {label}{' '}
      <select value={value} onChange={(event) => set(Number((event.target as HTMLSelectElement).value))}>
        {props.versions.map((version) => (
          <option value={version}>
            Version {version}
            {version === props.current ? ' (current)' : ''}
          </option>
        ))}
      </select>
    </label>
  );
  if (props.versions.length < 2) return <p class="muted">One version so far: each update writes the next, to compare here.</p>;
  return (
    <section aria-labelledby="diff-title">
      <h2 id="diff-title">Compare versions</h2>
      <div class="inline-form">
        {picker('From', left, setLeft)}
        {picker('To', right, setRight)}
      </div>
      <Loading loaded={loaded}>
        {() => {
          const [from, to] = loaded.data!;
          const rows = FIELDS.map((field) => ({ label: field.label, from: field.text(from!), to: field.text(to!) }));
          const changed = rows.filter((row) => row.from !== row.to).length;
          return (
            <>
              <p id="diff-summary">{changed === 0 ? 'The two versions are the same.' : `${changed} field${changed === 1 ? '' : 's'} changed.`}</p>
              <div id="definition-diff">
                <Table caption={`Version ${from!.version} against version ${to!.version}`} head={['Field', `Version ${from!.version}`, `Version ${to!.version}`]} captionHidden>
                  {rows.map((row) => (
                    <tr class={row.from === row.to ? undefined : 'changed'} data-changed={row.from === row.to ? undefined : 'true'}>
                      <th scope="row">
                        {row.label}
                        {row.from !== row.to && <span class="tag">changed</span>}
                      </th>
                      <td class="diff-cell">{row.from}</td>
                      <td class="diff-cell">{row.to}</td>
                    </tr>
                  ))}
                </Table>
              </div>
            </>
          );
        }}
      </Loading>
    </section>
  );
}
