import {
  ApiError,
  createMcpServer,
  deleteMcpServer,
  findMcpServer,
  listMcpServers,
  missingSecrets,
  webhookUrlProblem,
  type Clock,
  type McpServerRow,
  type Pool,
  type UrlPolicy,
} from '@berth/common';
import type { Principal } from '../http/context.js';

export function mcpServerView(row: McpServerRow) {
  return {
    id: row.id,
    name: row.name,
    url: row.url,
    ...(row.secretName !== null ? { secret: row.secretName, header: row.header ?? 'Authorization' } : {}),
    createdAt: row.createdAt,
  };
}

/** MCP server connections of an organization; the URL is held to the rules of outbound webhooks. */
export function createMcpServerService(deps: { pool: Pool; clock: Clock; policy: UrlPolicy }) {
  const { pool, clock } = deps;
  const scopeOf = (principal: Principal) => ({ organizationId: principal.organizationId, mode: principal.mode });
  return {
    async create(principal: Principal, input: { name: string; url: string; secret?: string | undefined; header?: string | undefined }) {
      const urlProblem = webhookUrlProblem(input.url, deps.policy);
      if (urlProblem) throw new ApiError('unprocessable_entity', `url: ${urlProblem}`, { fields: { url: [urlProblem] } });
      if (input.header !== undefined && input.secret === undefined) {
        throw new ApiError('unprocessable_entity', 'header: only with secret (it names the header the secret is sent in)', { fields: { header: ['only with secret'] } });
      }
      if (input.secret !== undefined) {
        // Organization secrets only: a server serves every session of the organization.
        const missing = await missingSecrets(pool, { ...scopeOf(principal), sessionId: '' }, [input.secret]);
        if (missing.length > 0) {
          throw new ApiError('unprocessable_entity', `secret: no organization secret named ${input.secret}`, { fields: { secret: ['no such organization secret'] } });
        }
      }
      const row = await createMcpServer(pool, scopeOf(principal), { name: input.name, url: input.url, secretName: input.secret, header: input.header }, clock.now());
      return mcpServerView(row);
    },

    async list(principal: Principal) {
      return { data: (await listMcpServers(pool, scopeOf(principal))).map(mcpServerView) };
    },

    async delete(principal: Principal, idOrName: string) {
      const server = await findMcpServer(pool, scopeOf(principal), idOrName);
      if (!server || !(await deleteMcpServer(pool, scopeOf(principal), server.id))) throw new ApiError('not_found', `MCP server ${idOrName} does not exist`);
      return { ok: true as const };
    },
  };
}

export type McpServerService = ReturnType<typeof createMcpServerService>;
