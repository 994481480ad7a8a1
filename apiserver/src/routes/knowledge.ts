import { z } from 'zod';
import { CHUNK_CHARS, MAX_SOURCE_CHARS, MAX_SEARCH_RESULTS } from '@berth/common';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { KnowledgeService } from '../services/knowledge.js';
import { paginationQuery } from '../services/pagination.js';
import { okSchema } from './schemas.js';

const collectionName = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'letters, digits, ., _ and -, starting with a letter or digit');

export const collectionParam = z.object({ id: z.string().min(1).max(200).describe('collection id (`kcol_…`) or name') }).strict();

export const collectionSchema = z
  .object({
    id: z.string().describe('`kcol_…`'),
    name: z.string(),
    description: z.string().optional(),
    sessionId: z.string().optional().describe("set on a session's default collection (`knowledge: true`)"),
    sourceCount: z.number().int(),
    chunkCount: z.number().int(),
    storageBytes: z.number().int().describe('bytes of text the chunks hold'),
    createdAt: z.string(),
  })
  .meta({ id: 'KnowledgeCollection' });

export const sourceSchema = z
  .object({
    id: z.string().describe('`ksrc_…`'),
    collectionId: z.string(),
    type: z.enum(['text', 'file', 'url']),
    name: z.string(),
    url: z.string().optional(),
    state: z.enum(['synced', 'failed']).describe('failed: a URL that could not be fetched (`error` says why)'),
    error: z.string().optional(),
    chunkCount: z.number().int(),
    bytes: z.number().int(),
    createdAt: z.string(),
    syncedAt: z.string().optional(),
  })
  .meta({ id: 'KnowledgeSource' });

export const createCollectionBody = z
  .object({
    name: collectionName.describe('unique in the organization; agents name the collection by it or by id'),
    description: z.string().max(1000).optional(),
    sessionId: z.string().min(1).max(64).optional().describe("makes it that session's default collection (at most one a session)"),
  })
  .strict();

const MAX_FILE_BASE64 = Math.ceil((MAX_SOURCE_CHARS * 4) / 3) + 4;

export const sourceBody = z
  .discriminatedUnion('type', [
    z
      .object({
        type: z.literal('text'),
        name: z.string().min(1).max(200).optional().describe('shown in search results; default `text`'),
        text: z.string().min(1).max(MAX_SOURCE_CHARS),
      })
      .strict(),
    z
      .object({
        type: z.literal('file'),
        name: z.string().min(1).max(200).describe('the file name; `.html` files are read as HTML'),
        content: z.base64().min(1).max(MAX_FILE_BASE64).describe('the file, base64; UTF-8 text (plain, Markdown, CSV, JSON or HTML)'),
        contentType: z.enum(['text/plain', 'text/markdown', 'text/csv', 'application/json', 'text/html']).optional(),
      })
      .strict(),
    z
      .object({
        type: z.literal('url'),
        url: z.url().max(2048).describe('fetched once by the server, under the rules of outbound webhooks (https; no private addresses)'),
        name: z.string().min(1).max(200).optional().describe('default: the URL'),
      })
      .strict(),
  ])
  .describe('a text, an uploaded file or a URL');

export const collectionPage = z
  .object({ data: z.array(collectionSchema), hasMore: z.boolean(), cursor: z.string().optional().describe('pass as `cursor` for the next page') })
  .meta({ id: 'KnowledgeCollectionPage' });
export const sourcePage = z
  .object({ data: z.array(sourceSchema), hasMore: z.boolean(), cursor: z.string().optional().describe('pass as `cursor` for the next page') })
  .meta({ id: 'KnowledgeSourcePage' });

export const collectionExample = {
  id: 'kcol_01jd2m4x7q8r9s0t1v2w3x4y5z',
  name: 'handbook',
  description: 'the support handbook',
  sourceCount: 1,
  chunkCount: 12,
  storageBytes: 13_480,
  createdAt: '2026-11-23T10:00:00.000Z',
};
export const sourceExample = {
  id: 'ksrc_01jd2m5a1b2c3d4e5f6g7h8j9k',
  collectionId: collectionExample.id,
  type: 'url' as const,
  name: 'Refund policy',
  url: 'https://example.com/refunds',
  state: 'synced' as const,
  chunkCount: 12,
  bytes: 13_480,
  createdAt: '2026-11-23T10:01:00.000Z',
  syncedAt: '2026-11-23T10:01:01.000Z',
};

const SEARCH =
  `Agents with \`knowledge\` search their collection with the \`knowledge_search\` tool: PostgreSQL full-text search over chunks of about ${CHUNK_CHARS} characters, at most ${MAX_SEARCH_RESULTS} results a call.`;

export function knowledgeRoutes(table: RouteTable, knowledge: KnowledgeService): void {
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/knowledge/collections',
      operationId: 'createKnowledgeCollection',
      tag: 'Knowledge',
      summary: 'Create a knowledge collection',
      description: `A collection of documents of the organization. ${SEARCH} A taken name is 409; \`sessionId\` of a session that has a default collection is 409.`,
      body: createCollectionBody,
      requestExample: { name: 'handbook', description: 'the support handbook' },
      responses: { 201: { description: 'the collection', schema: collectionSchema, example: { ...collectionExample, sourceCount: 0, chunkCount: 0, storageBytes: 0 } } },
      errors: ['unprocessable_entity', 'conflict', 'not_found'],
      handler: async ({ principal, body }) => ({ status: 201, body: await knowledge.create(principal, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/knowledge/collections',
      operationId: 'listKnowledgeCollections',
      tag: 'Knowledge',
      summary: 'List knowledge collections',
      description: 'Oldest first, with their source and chunk counts.',
      query: paginationQuery,
      responses: { 200: { description: 'one page of collections', schema: collectionPage, example: { data: [collectionExample], hasMore: false } } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, query }) => ({ status: 200, body: await knowledge.list(principal, query) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/knowledge/collections/:id',
      operationId: 'getKnowledgeCollection',
      tag: 'Knowledge',
      summary: 'Get a knowledge collection',
      description: 'By id or name.',
      params: collectionParam,
      responses: { 200: { description: 'the collection', schema: collectionSchema, example: collectionExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await knowledge.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/knowledge/collections/:id',
      operationId: 'deleteKnowledgeCollection',
      tag: 'Knowledge',
      summary: 'Delete a knowledge collection',
      description: 'With its sources and chunks. Agents that name it find nothing afterwards (their `knowledge_search` says the collection is gone).',
      params: collectionParam,
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await knowledge.delete(principal, params.id) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/knowledge/collections/:id/sources',
      operationId: 'addKnowledgeSource',
      tag: 'Knowledge',
      summary: 'Add a source to a knowledge collection',
      description:
        `A text, an uploaded file (base64 UTF-8 text; HTML is read as its text) or a URL the server fetches once (the rules of outbound webhooks apply: https unless the install allows http, no private, loopback or link-local address, 10 s, at most ${MAX_SOURCE_CHARS} bytes). ` +
        'The text is chunked and indexed before the answer; `knowledge.sync_completed` is written with the chunk count and storage used. A URL that cannot be fetched gives a source in state `failed` (201, with `error`) and `knowledge.sync_failed` with the source id and the error. A file that is not UTF-8 text is 422.',
      params: collectionParam,
      body: sourceBody,
      requestExample: { type: 'text', name: 'Refund policy', text: 'Refunds are paid within 14 days of a return.' },
      responses: { 201: { description: 'the source, synced or failed', schema: sourceSchema, example: sourceExample } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params, body }) => ({ status: 201, body: await knowledge.addSource(principal, params.id, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/knowledge/collections/:id/sources',
      operationId: 'listKnowledgeSources',
      tag: 'Knowledge',
      summary: "List a knowledge collection's sources",
      description: 'Oldest first.',
      params: collectionParam,
      query: paginationQuery,
      responses: { 200: { description: 'one page of sources', schema: sourcePage, example: { data: [sourceExample], hasMore: false } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params, query }) => ({ status: 200, body: await knowledge.listSources(principal, params.id, query) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/knowledge/collections/:id/sources/:sourceId',
      operationId: 'deleteKnowledgeSource',
      tag: 'Knowledge',
      summary: 'Delete a knowledge source',
      description: 'With its chunks: searches no longer find them.',
      params: collectionParam.extend({ sourceId: z.string().min(1).max(64).describe('`ksrc_…`') }),
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await knowledge.deleteSource(principal, params.id, params.sourceId) }),
    }),
  );
}
