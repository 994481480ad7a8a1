import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { ApiError } from './errors.js';
import { isId, newId } from './ids.js';

/**
 * MCP servers of an organization: a URL (streamable HTTP) and, optionally, the name of an
 * organization secret sent as a header (`Authorization: Bearer <value>` unless another header
 * is named). Agents name servers in `mcp`; the runner connects to them for each run.
 */
export interface McpServerRow {
  id: string;
  name: string;
  url: string;
  secretName: string | null;
  header: string | null;
  createdAt: string;
}

export interface McpScope {
  organizationId: string;
  mode: Mode;
}

function serverOf(row: Record<string, unknown>): McpServerRow {
  return {
    id: row.id as string,
    name: row.name as string,
    url: row.url as string,
    secretName: (row.secret_name as string | null) ?? null,
    header: (row.header as string | null) ?? null,
    createdAt: (row.created_at as Date).toISOString(),
  };
}

export async function createMcpServer(
  db: Queryable,
  scope: McpScope,
  input: { name: string; url: string; secretName?: string | undefined; header?: string | undefined },
  now: Date,
): Promise<McpServerRow> {
  const { rows } = await db.query(
    `INSERT INTO mcp_servers (id, organization_id, mode, name, url, secret_name, header, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING RETURNING *`,
    [newId('mcp', now), scope.organizationId, scope.mode, input.name, input.url, input.secretName ?? null, input.header ?? null, now],
  );
  if (!rows[0]) throw new ApiError('conflict', `an MCP server named "${input.name}" exists already`, { fields: { name: ['taken'] } });
  return serverOf(rows[0]);
}

export async function listMcpServers(db: Queryable, scope: McpScope): Promise<McpServerRow[]> {
  const { rows } = await db.query('SELECT * FROM mcp_servers WHERE organization_id = $1 AND mode = $2 ORDER BY id', [scope.organizationId, scope.mode]);
  return rows.map(serverOf);
}

export async function findMcpServer(db: Queryable, scope: McpScope, idOrName: string): Promise<McpServerRow | undefined> {
  const column = isId(idOrName, 'mcp') ? 'id' : 'name';
  const { rows } = await db.query(`SELECT * FROM mcp_servers WHERE ${column} = $1 AND organization_id = $2 AND mode = $3`, [idOrName, scope.organizationId, scope.mode]);
  return rows[0] ? serverOf(rows[0]) : undefined;
}

export async function deleteMcpServer(db: Queryable, scope: McpScope, id: string): Promise<boolean> {
  const result = await db.query('DELETE FROM mcp_servers WHERE id = $1 AND organization_id = $2 AND mode = $3', [id, scope.organizationId, scope.mode]);
  return (result.rowCount ?? 0) > 0;
}

/** The servers an agent's `mcp` names (`*`: all of the organization's); `missing` lists names that match none. */
export async function resolveAgentMcp(db: Queryable, scope: McpScope, mcp: string[] | '*'): Promise<{ servers: McpServerRow[]; missing: string[] }> {
  if (mcp === '*') return { servers: await listMcpServers(db, scope), missing: [] };
  const servers: McpServerRow[] = [];
  const missing: string[] = [];
  for (const name of mcp) {
    const server = await findMcpServer(db, scope, name);
    if (server) {
      if (!servers.some((known) => known.id === server.id)) servers.push(server);
    } else missing.push(name);
  }
  return { servers, missing };
}
