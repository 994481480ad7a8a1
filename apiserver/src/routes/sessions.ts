import { defineRoute, type RouteTable } from '../http/route.js';
import type { SessionService } from '../services/sessions.js';
import { paginationQuery } from '../services/pagination.js';
import { z } from 'zod';
import { createSessionBody, idParam, sessionByUserBody, sessionPage, sessionSchema, updateSessionBody } from './schemas.js';
import { createSessionExample, sessionExample } from './examples.js';

export function sessionRoutes(table: RouteTable, sessions: SessionService): void {
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/sessions',
      operationId: 'createSession',
      tag: 'Sessions',
      summary: 'Create a session',
      description:
        "A session isolates one end-user of your application; cost, limits and billing are scoped to it. Every call creates a new session; the user's first session is also the one `by-user` returns.",
      body: createSessionBody,
      requestExample: createSessionExample,
      responses: { 201: { description: 'the new session', schema: sessionSchema, example: sessionExample } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, body }) => ({ status: 201, body: await sessions.create(principal, body) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/sessions/by-user/:userId',
      operationId: 'getOrCreateSessionForUser',
      tag: 'Sessions',
      summary: "Get or create a user's session",
      description:
        'Idempotent get-or-create: returns the existing session of `userId` unchanged (200), or creates it with the given limits and metadata (201). Safe under concurrent calls: they all get the same session.',
      params: z.object({ userId: z.string().min(1).max(256).describe("the customer's end-user identifier") }).strict(),
      body: sessionByUserBody,
      requestExample: { limits: createSessionExample.limits, metadata: createSessionExample.metadata },
      responses: {
        200: { description: 'the existing session, unchanged', schema: sessionSchema, example: sessionExample },
        201: { description: 'the session, just created', schema: sessionSchema, example: sessionExample },
      },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, params, body }) => {
        const { session, created } = await sessions.getOrCreateForUser(principal, params.userId, body);
        return { status: created ? 201 : 200, body: session };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/sessions',
      operationId: 'listSessions',
      tag: 'Sessions',
      summary: 'List sessions',
      description: 'Newest first, in a stable order. Pass the returned `cursor` to get the next page; it is absent on the last page.',
      query: paginationQuery,
      responses: { 200: { description: 'one page of sessions', schema: sessionPage, example: { data: [sessionExample], hasMore: false } } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, query }) => ({ status: 200, body: await sessions.list(principal, query) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/sessions/:id',
      operationId: 'getSession',
      tag: 'Sessions',
      summary: 'Get a session',
      description: 'The session as created: userId, environment, limits, metadata and creation time.',
      params: idParam('ses', 'session'),
      responses: { 200: { description: 'the session', schema: sessionSchema, example: sessionExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await sessions.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'patch',
      path: '/v1/sessions/:id',
      operationId: 'updateSession',
      tag: 'Sessions',
      summary: "Change a session's limits or metadata",
      description:
        'Not in the spec: replaces `limits` and/or `metadata` as a whole. Raising a limit the session has reached lets `run`, `exec`, `resume` and new agents through again (agents paused by the limit stay paused until resumed). Lowering one below what is used pauses the running agents on the operator\'s next billing pass.',
      params: idParam('ses', 'session'),
      body: updateSessionBody,
      requestExample: { limits: { maxAgents: 5 } },
      responses: { 200: { description: 'the session, updated', schema: sessionSchema, example: { ...sessionExample, limits: { maxAgents: 5 } } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await sessions.update(principal, params.id, body) }),
    }),
  );
}
