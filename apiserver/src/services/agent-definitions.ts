import {
  ApiError,
  DEFINITION_COLUMNS,
  MAX_TIMEOUT_SECONDS,
  WITH_CURRENT_VERSION,
  isId,
  isUniqueViolation,
  newId,
  resolveDefinition,
  toolListProblem,
  withTransaction,
  type Clock,
  type DefinitionConfig,
  type DefinitionRow,
  type Pool,
  type PoolClient,
  type Queryable,
  type ResolvedDefinition,
} from '@berth/common';
import { formatDuration, parseDuration, type Compute, type Egress, type ModelSettings } from '@berth/crds';
import type { ModelRouter } from '@berth/operator';
import type { Principal } from '../http/context.js';

export type CreateDefinitionInput = DefinitionConfig & { name: string };

/** `null` removes an optional field; an omitted field keeps the current version's value. */
export interface UpdateDefinitionInput {
  description?: string | null | undefined;
  compute?: Compute | undefined;
  model?: string | null | undefined;
  systemPrompt?: string | null | undefined;
  tools?: string[] | undefined;
  browser?: boolean | undefined;
  timeout?: string | undefined;
  config?: ModelSettings | undefined;
  egress?: Egress | null | undefined;
  changelog?: string | undefined;
}

function view(row: DefinitionRow) {
  const { config } = row;
  return {
    id: row.id,
    name: row.name,
    description: config.description,
    version: row.current_version,
    compute: config.compute,
    model: config.model,
    systemPrompt: config.systemPrompt,
    tools: config.tools,
    browser: config.browser,
    timeout: config.timeout,
    config: config.config,
    egress: config.egress,
    archived: row.archived_at !== null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}
export type AgentDefinitionView = ReturnType<typeof view>;

function unprocessable(field: string, problem: string): ApiError {
  return new ApiError('unprocessable_entity', `${field}: ${problem}`, { fields: { [field]: [problem] } });
}

/** Changelog of an update that does not bring its own. */
function describeChanges(input: UpdateDefinitionInput): string {
  const fields = Object.entries(input)
    .filter(([field, value]) => field !== 'changelog' && value !== undefined)
    .map(([field]) => field);
  return `changed ${fields.join(', ')}`;
}

export function createAgentDefinitionService(deps: { pool: Pool; clock: Clock; models: Pick<ModelRouter, 'problem'> }) {
  const { pool, clock } = deps;

  /** The same checks as agent creation, so that an agent made from a valid definition is valid; the timeout capped. */
  function validated(config: DefinitionConfig): DefinitionConfig {
    if (config.model !== undefined) {
      const problem = deps.models.problem(config.model);
      if (problem) throw unprocessable('model', problem);
    }
    const toolProblem = toolListProblem(config.tools, config.browser);
    if (toolProblem) throw unprocessable('tools', toolProblem);
    const timeout = formatDuration(Math.min(parseDuration(config.timeout)!, MAX_TIMEOUT_SECONDS));
    return JSON.parse(JSON.stringify({ ...config, timeout })) as DefinitionConfig; // drops undefined fields
  }

  /** The caller's definition with this id, archived or not; anything else is 404. `lock` holds it for the transaction. */
  async function find(db: Queryable, principal: Principal, id: string, lock = false): Promise<DefinitionRow> {
    const { rows } = isId(id, 'adef')
      ? await db.query<DefinitionRow>(
          `SELECT ${DEFINITION_COLUMNS} FROM ${WITH_CURRENT_VERSION}
           WHERE d.id = $1 AND d.organization_id = $2 AND d.mode = $3${lock ? ' FOR UPDATE OF d' : ''}`,
          [id, principal.organizationId, principal.mode],
        )
      : { rows: [] };
    if (!rows[0]) throw new ApiError('not_found', `agent definition ${id} does not exist`, { id });
    return rows[0];
  }

  function assertNotArchived(row: DefinitionRow, action: string): void {
    if (row.archived_at) {
      throw new ApiError('conflict', `agent definition ${row.id} is archived; ${action} is only possible on a definition that is not`, {
        archivedAt: row.archived_at.toISOString(),
      });
    }
  }

  /** Writes a new definition at version 1; a name taken by a live definition is 409. */
  async function insert(tx: PoolClient, principal: Principal, name: string, config: DefinitionConfig, changelog: string): Promise<DefinitionRow> {
    const now = clock.now();
    const id = newId('adef', now);
    try {
      await tx.query(
        `INSERT INTO agent_definitions (id, organization_id, mode, name, current_version, created_at, updated_at)
         VALUES ($1, $2, $3, $4, 1, $5, $5)`,
        [id, principal.organizationId, principal.mode, name, now],
      );
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      throw new ApiError('conflict', `an agent definition named "${name}" exists already; choose another name or update that one`, {
        fields: { name: ['taken by another agent definition'] },
      });
    }
    await insertVersion(tx, principal, id, 1, config, changelog, now);
    return { id, name, current_version: 1, archived_at: null, created_at: now, updated_at: now, config };
  }

  async function insertVersion(
    tx: PoolClient,
    principal: Principal,
    id: string,
    version: number,
    config: DefinitionConfig,
    changelog: string,
    now: Date,
  ): Promise<void> {
    await tx.query(
      'INSERT INTO agent_definition_versions (definition_id, version, config, changelog, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
      [id, version, JSON.stringify(config), changelog, principal.keyId, now],
    );
  }

  return {
    async create(principal: Principal, input: CreateDefinitionInput) {
      const { name, ...config } = input;
      const row = await withTransaction(pool, (tx) => insert(tx, principal, name, validated(config), 'created'));
      return view(row);
    },

    async list(principal: Principal, options: { includeArchived: boolean }) {
      const { rows } = await pool.query<DefinitionRow>(
        `SELECT ${DEFINITION_COLUMNS} FROM ${WITH_CURRENT_VERSION}
         WHERE d.organization_id = $1 AND d.mode = $2 AND ($3 OR d.archived_at IS NULL)
         ORDER BY d.created_at DESC, d.id DESC`,
        [principal.organizationId, principal.mode, options.includeArchived],
      );
      return { data: rows.map(view) };
    },

    async get(principal: Principal, id: string) {
      return view(await find(pool, principal, id));
    },

    /** Writes the next version (after the highest, not after the current one) and makes it current. */
    async update(principal: Principal, id: string, input: UpdateDefinitionInput) {
      return withTransaction(pool, async (tx) => {
        const row = await find(tx, principal, id, true);
        assertNotArchived(row, 'updating');
        const { changelog, ...changes } = input;
        const merged: Record<string, unknown> = { ...row.config };
        for (const [field, value] of Object.entries(changes)) {
          if (value === null) delete merged[field];
          else if (value !== undefined) merged[field] = value;
        }
        const config = validated(merged as unknown as DefinitionConfig);
        const { rows } = await tx.query<{ latest: number }>(
          'SELECT max(version) AS latest FROM agent_definition_versions WHERE definition_id = $1',
          [row.id],
        );
        const version = rows[0]!.latest + 1;
        const now = clock.now();
        await insertVersion(tx, principal, row.id, version, config, changelog ?? describeChanges(input), now);
        await tx.query('UPDATE agent_definitions SET current_version = $2, updated_at = $3 WHERE id = $1', [row.id, version, now]);
        return view({ ...row, current_version: version, updated_at: now, config });
      });
    },

    /** Archives: kept and readable, listed with includeArchived, no new agents. Archiving twice changes nothing. */
    async archive(principal: Principal, id: string) {
      const row = await find(pool, principal, id);
      const now = clock.now();
      await pool.query('UPDATE agent_definitions SET archived_at = $2, updated_at = $2 WHERE id = $1 AND archived_at IS NULL', [row.id, now]);
      return { ok: true as const };
    },

    async versions(principal: Principal, id: string) {
      const row = await find(pool, principal, id);
      const { rows } = await pool.query<{ version: number; created_at: Date; changelog: string; created_by: string }>(
        'SELECT version, created_at, changelog, created_by FROM agent_definition_versions WHERE definition_id = $1 ORDER BY version DESC',
        [row.id],
      );
      return {
        data: rows.map((entry) => ({
          version: entry.version,
          createdAt: entry.created_at.toISOString(),
          changelog: entry.changelog,
          createdBy: entry.created_by,
        })),
      };
    },

    /** The definition's fields as one version holds them, to compare two versions or read one before a rollback. */
    async version(principal: Principal, id: string, version: number) {
      const row = await find(pool, principal, id);
      const { rows } = await pool.query<{ config: DefinitionConfig; changelog: string; created_by: string; created_at: Date }>(
        'SELECT config, changelog, created_by, created_at FROM agent_definition_versions WHERE definition_id = $1 AND version = $2',
        [row.id, version],
      );
      const entry = rows[0];
      if (!entry) throw new ApiError('not_found', `agent definition ${row.id} has no version ${version}`, { id: row.id, version });
      const { archived: _archived, createdAt: _created, updatedAt: _updated, ...fields } = view({ ...row, current_version: version, config: entry.config });
      return {
        ...fields,
        current: version === row.current_version,
        changelog: entry.changelog,
        createdBy: entry.created_by,
        createdAt: entry.created_at.toISOString(),
      };
    },

    /** Points the current version at an existing one; the versions after it stay. */
    async rollback(principal: Principal, id: string, version: number) {
      return withTransaction(pool, async (tx) => {
        const row = await find(tx, principal, id, true);
        assertNotArchived(row, 'rolling back');
        const { rows } = await tx.query<{ latest: number }>(
          'SELECT max(version) AS latest FROM agent_definition_versions WHERE definition_id = $1',
          [row.id],
        );
        const latest = rows[0]!.latest;
        if (version > latest) {
          throw new ApiError('unprocessable_entity', `version: agent definition ${row.id} has no version ${version}; its versions are 1 to ${latest}`, {
            fields: { version: [`no such version; the versions are 1 to ${latest}`] },
          });
        }
        await tx.query('UPDATE agent_definitions SET current_version = $2, updated_at = $3 WHERE id = $1', [row.id, version, clock.now()]);
        return { ok: true as const, version };
      });
    },

    /** A new, independent definition at version 1 with the current version's config; archived ones can be copied too. */
    async duplicate(principal: Principal, id: string, name: string) {
      return withTransaction(pool, async (tx) => {
        const source = await find(tx, principal, id);
        const copy = await insert(tx, principal, name, source.config, `duplicated from ${source.id} version ${source.current_version}`);
        return { id: copy.id, name: copy.name };
      });
    },

    /** The definition an agent is created from (see `resolveDefinition`). */
    resolve(principal: Principal, nameOrId: string, field?: string): Promise<ResolvedDefinition> {
      return resolveDefinition(pool, principal, nameOrId, field);
    },
  };
}

export type AgentDefinitionService = ReturnType<typeof createAgentDefinitionService>;
