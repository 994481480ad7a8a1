import { z } from 'zod';
import { SECRET_NAME_PATTERN } from '@berth/common';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { McpServerService } from '../services/mcp-servers.js';
import { okSchema } from './schemas.js';

/** Server names become part of tool names (`mcp__<server>__<tool>`), which models limit to 64 characters of [A-Za-z0-9_-]. */
const serverName = z
  .string()
  .min(1)
  .max(24)
  .regex(/^[A-Za-z0-9][A-Za-z0-9-]*$/, 'letters, digits and -, starting with a letter or digit');

export const createMcpServerBody = z
  .object({
    name: serverName.describe('unique in the organization; its tools reach the model as `mcp__<name>__<tool>`'),
    url: z.string().max(2048).describe('the streamable HTTP endpoint; https, no private addresses (the rules of outbound webhooks)'),
    secret: z.string().regex(SECRET_NAME_PATTERN, 'must be a secret name').optional().describe('an organization secret whose value is sent with every request'),
    header: z
      .string()
      .regex(/^[A-Za-z][A-Za-z0-9-]{0,63}$/, 'must be an HTTP header name')
      .optional()
      .describe('the header the secret is sent in; default `Authorization`, as `Bearer <value>`; another header gets the value as it is'),
  })
  .strict();

export const mcpServerSchema = z
  .object({
    id: z.string().describe('`mcp_…`'),
    name: z.string(),
    url: z.string(),
    secret: z.string().optional().describe('the name of the secret sent, never its value'),
    header: z.string().optional(),
    createdAt: z.string(),
  })
  .meta({ id: 'McpServer' });

export const mcpServerList = z.object({ data: z.array(mcpServerSchema) }).meta({ id: 'McpServerList' });

export const mcpServerExample = {
  id: 'mcp_01jd2m4x7q8r9s0t1v2w3x4y5z',
  name: 'crm',
  url: 'https://mcp.example.com/mcp',
  secret: 'CRM_MCP_TOKEN',
  header: 'Authorization',
  createdAt: '2026-11-23T10:00:00.000Z',
};

export function mcpServerRoutes(table: RouteTable, servers: McpServerService): void {
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/mcp-servers',
      operationId: 'registerMcpServer',
      tag: 'MCP servers',
      summary: 'Register an MCP server',
      description:
        'An MCP server (streamable HTTP) whose tools agents with `mcp` naming it (or `*`) are offered, as `mcp__<server>__<tool>`. The runner connects at the start of each run, lists its tools and calls them with the official MCP SDK; a result is cut at 16 KiB. ' +
        'With `secret` (an organization secret), its value is sent as `Authorization: Bearer <value>`, or as the value of `header`. The URL is held to the rules of outbound webhooks (https; no private, loopback or link-local address, checked again before each connection). A taken name is 409.',
      body: createMcpServerBody,
      requestExample: { name: 'crm', url: 'https://mcp.example.com/mcp', secret: 'CRM_MCP_TOKEN' },
      responses: { 201: { description: 'the server', schema: mcpServerSchema, example: mcpServerExample } },
      errors: ['unprocessable_entity', 'conflict'],
      handler: async ({ principal, body }) => ({ status: 201, body: await servers.create(principal, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/mcp-servers',
      operationId: 'listMcpServers',
      tag: 'MCP servers',
      summary: 'List MCP servers',
      description: 'Oldest first; secrets by name, never their values.',
      responses: { 200: { description: 'the servers', schema: mcpServerList, example: { data: [mcpServerExample] } } },
      errors: [],
      handler: async ({ principal }) => ({ status: 200, body: await servers.list(principal) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/mcp-servers/:id',
      operationId: 'deleteMcpServer',
      tag: 'MCP servers',
      summary: 'Delete an MCP server',
      description: 'By id or name. Runs that start afterwards no longer get its tools.',
      params: z.object({ id: z.string().min(1).max(64).describe('`mcp_…` or the name') }).strict(),
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await servers.delete(principal, params.id) }),
    }),
  );
}
