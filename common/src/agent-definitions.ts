import type { Compute, Egress, ModelSettings } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { ApiError } from './errors.js';
import { isId } from './ids.js';
import type { Principal } from './principal.js';

/** What one version of a definition holds: everything but its name, which never changes. */
export interface DefinitionConfig {
  description?: string | undefined;
  compute: Compute;
  model?: string | undefined;
  systemPrompt?: string | undefined;
  tools: string[];
  browser: boolean;
  timeout: string;
  config: ModelSettings;
  /** The egress policy of its agents (ADR 46); absent: the install's default. */
  egress?: Egress | undefined;
}

/** The current version of a live definition, as an agent is created from it. */
export interface ResolvedDefinition {
  id: string;
  version: number;
  config: DefinitionConfig;
}

export interface DefinitionRow {
  id: string;
  name: string;
  current_version: number;
  archived_at: Date | null;
  created_at: Date;
  updated_at: Date;
  config: DefinitionConfig;
}

export const DEFINITION_COLUMNS = 'd.id, d.name, d.current_version, d.archived_at, d.created_at, d.updated_at, v.config';
export const WITH_CURRENT_VERSION = 'agent_definitions d JOIN agent_definition_versions v ON v.definition_id = d.id AND v.version = d.current_version';

/** The agent creation fields a definition gives an agent made from it. */
export function agentFieldsOf(config: DefinitionConfig): Record<string, unknown> {
  const fields = {
    compute: config.compute,
    model: config.model,
    instructions: config.systemPrompt,
    tools: config.tools,
    browser: config.browser,
    timeout: config.timeout,
    modelSettings: Object.keys(config.config).length > 0 ? config.config : undefined,
    egress: config.egress,
  };
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

/**
 * The definition an agent is created from, by id or name, in the principal's organization and
 * mode: its current version. Unknown and archived definitions are 422 naming `field` (by
 * default `definition`), like any other unusable field value.
 */
export async function resolveDefinition(
  db: Queryable,
  principal: Pick<Principal, 'organizationId' | 'mode'>,
  nameOrId: string,
  field = 'definition',
): Promise<ResolvedDefinition> {
  const byId = isId(nameOrId, 'adef');
  // By name, a live definition wins over archived ones of the same name.
  const { rows } = await db.query<DefinitionRow>(
    `SELECT ${DEFINITION_COLUMNS} FROM ${WITH_CURRENT_VERSION}
     WHERE ${byId ? 'd.id' : 'd.name'} = $1 AND d.organization_id = $2 AND d.mode = $3
     ORDER BY d.archived_at IS NULL DESC, d.archived_at DESC LIMIT 1`,
    [nameOrId, principal.organizationId, principal.mode],
  );
  const row = rows[0];
  if (!row) {
    const problem = `no agent definition "${nameOrId}" (give the name or the adef_… id of one)`;
    throw new ApiError('unprocessable_entity', `${field}: ${problem}`, { fields: { [field]: [problem] } });
  }
  if (row.archived_at) {
    throw new ApiError('unprocessable_entity', `${field}: agent definition ${nameOrId} is archived; no new agents can be created from it`, {
      fields: { [field]: ['archived'] },
      definitionId: row.id,
    });
  }
  return { id: row.id, version: row.current_version, config: row.config };
}
