import { z } from 'zod';
import type { Principal } from '@berth/common';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { Caller } from '../http/context.js';
import type { KnowledgeService } from '../services/knowledge.js';
import type { McpServerService } from '../services/mcp-servers.js';
import { paginationQuery } from '../services/pagination.js';
import { collectionExample, collectionPage, collectionParam, collectionSchema, createCollectionBody, sourceBody, sourceExample, sourcePage, sourceSchema } from './knowledge.js';
import { createMcpServerBody, mcpServerExample, mcpServerList, mcpServerSchema } from './mcp-servers.js';
import { okSchema } from './schemas.js';

/** The dashboard works on the organization's live resources, as a live API key does. */
function principalOf(caller: Caller): Principal {
  return { organizationId: caller.organizationId!, mode: 'live', keyId: `dashboard:${caller.user.id}` };
}

const SAME = 'Same as the `/v1` route of the same path, on the live resources of the organization the sign-in session acts in.';

/**
 * Knowledge collections and MCP servers on the management plane (`/api`), for a dashboard:
 * members and above read them, admins and the owner change them.
 */
export function agentResourceManagementRoutes(table: RouteTable, services: { knowledge: KnowledgeService; mcpServers: McpServerService }): void {
  const { knowledge, mcpServers } = services;
  table.add(
    defineRoute({
      method: 'get',
      path: '/api/knowledge/collections',
      operationId: 'dashboardListKnowledgeCollections',
      tag: 'Knowledge',
      summary: 'List knowledge collections',
      description: SAME,
      permission: 'agentResources.view',
      query: paginationQuery,
      responses: { 200: { description: 'one page of collections', schema: collectionPage, example: { data: [collectionExample], hasMore: false } } },
      errors: ['unprocessable_entity', 'forbidden'],
      handler: async ({ caller, query }) => ({ status: 200, body: await knowledge.list(principalOf(caller), query) }),
    }),
    defineRoute({
      method: 'post',
      path: '/api/knowledge/collections',
      operationId: 'dashboardCreateKnowledgeCollection',
      tag: 'Knowledge',
      summary: 'Create a knowledge collection',
      description: SAME,
      permission: 'agentResources.manage',
      body: createCollectionBody,
      requestExample: { name: 'handbook', description: 'the support handbook' },
      responses: { 201: { description: 'the collection', schema: collectionSchema, example: { ...collectionExample, sourceCount: 0, chunkCount: 0, storageBytes: 0 } } },
      errors: ['unprocessable_entity', 'conflict', 'not_found', 'forbidden'],
      handler: async ({ caller, body }) => ({ status: 201, body: await knowledge.create(principalOf(caller), body) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/knowledge/collections/:id',
      operationId: 'dashboardDeleteKnowledgeCollection',
      tag: 'Knowledge',
      summary: 'Delete a knowledge collection',
      description: SAME,
      permission: 'agentResources.manage',
      params: collectionParam,
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found', 'forbidden'],
      handler: async ({ caller, params }) => ({ status: 200, body: await knowledge.delete(principalOf(caller), params.id) }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/knowledge/collections/:id/sources',
      operationId: 'dashboardListKnowledgeSources',
      tag: 'Knowledge',
      summary: "List a knowledge collection's sources",
      description: SAME,
      permission: 'agentResources.view',
      params: collectionParam,
      query: paginationQuery,
      responses: { 200: { description: 'one page of sources', schema: sourcePage, example: { data: [sourceExample], hasMore: false } } },
      errors: ['not_found', 'unprocessable_entity', 'forbidden'],
      handler: async ({ caller, params, query }) => ({ status: 200, body: await knowledge.listSources(principalOf(caller), params.id, query) }),
    }),
    defineRoute({
      method: 'post',
      path: '/api/knowledge/collections/:id/sources',
      operationId: 'dashboardAddKnowledgeSource',
      tag: 'Knowledge',
      summary: 'Add a source to a knowledge collection',
      description: SAME,
      permission: 'agentResources.manage',
      params: collectionParam,
      body: sourceBody,
      requestExample: { type: 'text', name: 'Refund policy', text: 'Refunds are paid within 14 days of a return.' },
      responses: { 201: { description: 'the source, synced or failed', schema: sourceSchema, example: sourceExample } },
      errors: ['not_found', 'unprocessable_entity', 'forbidden'],
      handler: async ({ caller, params, body }) => ({ status: 201, body: await knowledge.addSource(principalOf(caller), params.id, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/mcp-servers',
      operationId: 'dashboardListMcpServers',
      tag: 'MCP servers',
      summary: 'List MCP servers',
      description: SAME,
      permission: 'agentResources.view',
      responses: { 200: { description: 'the servers', schema: mcpServerList, example: { data: [mcpServerExample] } } },
      errors: ['forbidden'],
      handler: async ({ caller }) => ({ status: 200, body: await mcpServers.list(principalOf(caller)) }),
    }),
    defineRoute({
      method: 'post',
      path: '/api/mcp-servers',
      operationId: 'dashboardRegisterMcpServer',
      tag: 'MCP servers',
      summary: 'Register an MCP server',
      description: SAME,
      permission: 'agentResources.manage',
      body: createMcpServerBody,
      requestExample: { name: 'crm', url: 'https://mcp.example.com/mcp', secret: 'CRM_MCP_TOKEN' },
      responses: { 201: { description: 'the server', schema: mcpServerSchema, example: mcpServerExample } },
      errors: ['unprocessable_entity', 'conflict', 'forbidden'],
      handler: async ({ caller, body }) => ({ status: 201, body: await mcpServers.create(principalOf(caller), body) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/mcp-servers/:id',
      operationId: 'dashboardDeleteMcpServer',
      tag: 'MCP servers',
      summary: 'Delete an MCP server',
      description: SAME,
      permission: 'agentResources.manage',
      params: z.object({ id: z.string().min(1).max(64).describe('`mcp_…` or the name') }).strict(),
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found', 'forbidden'],
      handler: async ({ caller, params }) => ({ status: 200, body: await mcpServers.delete(principalOf(caller), params.id) }),
    }),
  );
}
