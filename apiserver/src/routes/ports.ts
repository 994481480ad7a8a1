import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { PortProxy } from '../http/port-proxy.js';
import { proxyPath, type PortService } from '../services/ports.js';

/**
 * Ports of an agent's sandbox exposed through the API server (ADR 40): expose, list, close, a
 * token for browsers, and the proxy itself (HTTP here; WebSocket upgrades in http/port-proxy.ts).
 */

const agentParam = z.object({ id: z.string().min(1).max(128).describe('agent id (`agt_…`)') }).strict();
const portNumber = z.string().regex(/^[0-9]{1,5}$/, 'a port number').transform(Number).pipe(z.number().int().min(1).max(65535)).describe('the port, 1 to 65535');
const portParams = z.object({ id: z.string().min(1).max(128).describe('agent id (`agt_…`)'), port: portNumber }).strict();
const exposedSchema = z.object({ port: z.number().int(), url: z.string().describe('the proxy URL: send the API key as a bearer header'), createdAt: z.string() }).strict();
const example = { port: 8000, url: 'https://berth.example.com/v1/agents/agt_01m80gqvefwgc4tgw5batt7zt1/ports/8000/proxy/', createdAt: '2026-11-23T17:10:00.000Z' };
const PROXY_METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

export function portRoutes(table: RouteTable, deps: { ports: PortService; proxy: PortProxy; publicUrl: (requestOrigin: string) => string }): void {
  const urlOf = (origin: string, agentId: string, port: number) => `${deps.publicUrl(origin)}${proxyPath(agentId, port)}`;
  const originOf = (req: { protocol: string; get(name: string): string | undefined }) => `${req.protocol}://${req.get('host') ?? 'localhost'}`;
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/ports',
      operationId: 'exposePort',
      tag: 'Ports',
      summary: 'Expose a port of the sandbox',
      description:
        "Makes `port` on the sandbox's loopback reachable at `url` through the API server (HTTP and WebSocket), for keys of the agent's organization and mode. " +
        'Ports are closed until exposed; the sandbox itself keeps no network (the API server reaches the port through the sandbox). 201 when exposed now, 200 when it was already. ' +
        'At most 20 ports per agent (409 past that).',
      params: agentParam,
      body: z.object({ port: z.number().int().min(1).max(65535).describe('the port a program in the sandbox listens on (127.0.0.1 or 0.0.0.0)') }).strict(),
      requestExample: { port: 8000 },
      responses: {
        201: { description: 'exposed', schema: exposedSchema, example },
        200: { description: 'already exposed', schema: exposedSchema, example },
      },
      errors: ['not_found', 'conflict'],
      handler: async ({ req, principal, params, body }) => {
        const exposed = await deps.ports.expose(principal, params.id, body.port);
        return { status: exposed.created ? 201 : 200, body: { port: exposed.port, url: urlOf(originOf(req), params.id, exposed.port), createdAt: exposed.createdAt } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id/ports',
      operationId: 'listPorts',
      tag: 'Ports',
      summary: 'List exposed ports',
      description: "The agent's exposed ports, by number.",
      params: agentParam,
      responses: { 200: { description: 'the ports', schema: z.object({ data: z.array(exposedSchema) }).strict(), example: { data: [example] } } },
      errors: ['not_found'],
      handler: async ({ req, principal, params }) => ({
        status: 200,
        body: { data: (await deps.ports.list(principal, params.id)).map((exposed) => ({ ...exposed, url: urlOf(originOf(req), params.id, exposed.port) })) },
      }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/agents/:id/ports/:port',
      operationId: 'closePort',
      tag: 'Ports',
      summary: 'Close an exposed port',
      description: 'The proxy refuses the port again (404); connections already open through it (a WebSocket) run until they end.',
      params: portParams,
      responses: { 204: { description: 'closed' } },
      errors: ['not_found'],
      handler: async ({ res, principal, params }) => {
        await deps.ports.close(principal, params.id, params.port);
        res.status(204).end();
      },
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/ports/:port/token',
      operationId: 'createPortToken',
      tag: 'Ports',
      summary: 'A token to open an exposed port in a browser',
      description:
        'Browsers cannot send the API key: open `url` (the proxy URL with `?berth_token=`) and the proxy sets a cookie for this port\'s path (HttpOnly, SameSite=Lax) and redirects to the URL without the token. ' +
        "Valid for one hour, for this agent's port only; refused once the key it was issued to is revoked. A WebSocket client may pass `berth_token` on its URL too.",
      params: portParams,
      body: z.object({}).strict(),
      requestExample: {},
      responses: {
        201: {
          description: 'the token',
          schema: z.object({ token: z.string(), expiresAt: z.string().describe('ISO 8601'), url: z.string() }).strict(),
          example: { token: 'prt_eyJhIjoiYWd0XzAxIn0.c2ln', expiresAt: '2026-11-23T18:10:00.000Z', url: `${example.url}?berth_token=prt_eyJhIjoiYWd0XzAxIn0.c2ln` },
        },
      },
      errors: ['not_found'],
      handler: async ({ req, principal, params }) => {
        await deps.ports.assertExposed(principal, params.id, params.port);
        const issued = deps.ports.issueToken(principal, params.id, params.port);
        return { status: 201, body: { ...issued, url: `${urlOf(originOf(req), params.id, params.port)}?berth_token=${encodeURIComponent(issued.token)}` } };
      },
    }),
    ...PROXY_METHODS.map((method) =>
      defineRoute({
        method,
        path: '/v1/agents/:id/ports/:port/proxy{/*path}',
        operationId: `proxyPort${method[0]!.toUpperCase()}${method.slice(1)}`,
        tag: 'Ports',
        summary: `${method.toUpperCase()} to the program on an exposed port`,
        description:
          'The request (method, the path below `/proxy`, query, headers, body) passed to the program listening on the port inside the sandbox, and its answer streamed back as it is; this and every path below it. ' +
          'WebSocket upgrades are passed on too. Authenticated by `Authorization: Bearer <API key>`, or a port token (`?berth_token=`, then its cookie), never passed to the program. ' +
          '404 until the port is exposed; 502 when nothing listens on it. An agent paused by its idle policy is woken first (409 when paused for another reason).',
        auth: false,
        params: z.object({
          id: z.string().min(1).max(128).describe('agent id (`agt_…`)'),
          port: z.string().regex(/^[0-9]{1,5}$/).describe('the exposed port'),
          // Express gives the rest of the path as its segments; absent for the server's root (`…/proxy/`).
          path: z
            .preprocess((value) => (Array.isArray(value) ? value.join('/') : (value ?? '')), z.string().max(8192))
            .describe("the path on the program's server, below `/proxy/` (slashes included; empty for its root)"),
        }),
        // The program's own query parameters pass through as they are, repeated ones included.
        query: z
          .object({ berth_token: z.string().max(2048).optional().describe('a port token, for browsers (becomes a cookie)') })
          .catchall(z.union([z.string(), z.array(z.string())])),
        ...(method === 'get' || method === 'delete' ? {} : { streamBody: { description: "the request's body, passed on as it comes (any type)", contentTypes: ['application/octet-stream'], required: false, example: '{"query":"status"}' } }),
        responses: { 200: { description: "the program's answer, whatever its status, headers and body", contentType: 'application/octet-stream', example: '<!doctype html>…' } },
        errors: ['unauthorized', 'auth/invalid_key', 'auth/key_revoked', 'not_found', 'conflict', 'not_implemented', 'provider_error', 'headers_too_large'],
        handler: async ({ req, res }) => {
          await deps.proxy.http(req, res);
        },
      }),
    ),
  );
}
