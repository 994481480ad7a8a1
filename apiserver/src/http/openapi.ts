import { ERROR_STATUS, type ErrorCode } from '@berth/common';
import { z } from 'zod';
import { errorEnvelopeSchema } from './errors.js';
import { AUTH_ERRORS, SESSION_AUTH_ERRORS, type RouteSpec, type RouteTable } from './route.js';

type AnyRoute = RouteSpec<any, any, any>;
type JsonSchema = Record<string, unknown>;

const COMPONENTS = '#/components/schemas/';

/** Codes the HTTP layer answers whatever the route: a request it cannot read, and our own failures. */
const ALWAYS: ErrorCode[] = ['bad_request', 'internal_error'];
/** Codes of a request body it cannot take: too large, not JSON. */
/** Response types whose body is bytes, not text. */
const BINARY_TYPES = new Set(['application/octet-stream', 'application/x-tar']);
const BODY: ErrorCode[] = ['payload_too_large', 'unsupported_media_type', 'unprocessable_entity'];

/** Codes of a request with an API key: beside the three of authentication, the key's rate limit. */
const KEYED: ErrorCode[] = [...AUTH_ERRORS, 'rate_limited'];

/** The rate-limit headers of every response to a request with a valid key (http/rate-limit.ts). */
const RATE_LIMIT_RESPONSE_HEADERS = {
  'RateLimit-Limit': { description: 'requests a minute the key\'s plan allows', schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'requests left in the current window', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'seconds until the oldest counted request leaves the window', schema: { type: 'integer' } },
  'RateLimit-Policy': { description: 'the plan\'s limit and window in seconds, as `60;w=60`', schema: { type: 'string' } },
};

/** Every error code a route can answer with: those it names, plus those the HTTP layer adds. */
export function routeErrorCodes(route: AnyRoute): ErrorCode[] {
  return [
    ...new Set<ErrorCode>([
      ...(route.auth === false ? [] : route.permission ? SESSION_AUTH_ERRORS : KEYED),
      ...ALWAYS,
      ...(route.body || route.rawBody || route.streamBody ? BODY : []),
      ...(route.params || route.query ? (['unprocessable_entity'] as const) : []),
      ...route.errors,
    ]),
  ].filter((code) => code in ERROR_STATUS);
}

/**
 * Turns zod schemas into JSON Schemas whose named parts (`.meta({ id })`) are components:
 * each one is defined once under `components.schemas` and referenced with `$ref`. A schema
 * reads differently as a request (defaults make fields optional) and as a response; where
 * they differ, the request form is named `<id>Input`.
 */
class SchemaComponents {
  readonly schemas: Record<string, JsonSchema> = {};

  toSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
    const { $defs = {}, $schema: _, ...json } = convert(schema, io) as JsonSchema & { $defs?: Record<string, JsonSchema> };
    const names = new Map<string, string>();
    for (const [id, definition] of Object.entries($defs)) {
      let name = id;
      if (io === 'input') {
        const registered = z.globalRegistry._idmap.get(id);
        const outputForm = registered ? (convert(registered, 'output') as { $defs?: Record<string, unknown> }).$defs?.[id] : undefined;
        if (!sameJson(outputForm, definition)) name = `${id}Input`;
      }
      names.set(id, name);
    }
    const rewrite = (value: unknown): unknown => {
      if (Array.isArray(value)) return value.map(rewrite);
      if (value === null || typeof value !== 'object') return value;
      return Object.fromEntries(
        Object.entries(value).map(([key, inner]) =>
          key === '$ref' && typeof inner === 'string' && inner.startsWith('#/$defs/')
            ? [key, COMPONENTS + names.get(inner.slice('#/$defs/'.length))!]
            : [key, rewrite(inner)],
        ),
      );
    };
    for (const [id, definition] of Object.entries($defs)) {
      const name = names.get(id)!;
      const component = rewrite(definition) as JsonSchema;
      const existing = this.schemas[name];
      if (existing && !sameJson(existing, component)) throw new Error(`two different schemas are named ${name}`);
      this.schemas[name] = component;
    }
    return rewrite(json) as JsonSchema;
  }
}

function convert(schema: z.core.$ZodType, io: 'input' | 'output'): unknown {
  return z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' });
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export interface OpenapiInfo {
  version: string;
  /** Where clients reach the API: the install's public URL, or the origin a request came to; default `/`. */
  serverUrl?: string | undefined;
  /** `data` (default): the `/v1` API with bearer keys; `management`: the `/api` routes with the sign-in cookie. */
  plane?: 'data' | 'management';
}

/** The OpenAPI 3.1 document of a route table: the routes' own schemas, so the docs cannot drift from behaviour. */
export function openapiDocument(table: RouteTable, info: OpenapiInfo): Record<string, unknown> {
  const components = new SchemaComponents();
  const errorRef = { $ref: `${COMPONENTS}Error` };
  components.toSchema(errorEnvelopeSchema, 'output');
  const paths: Record<string, Record<string, unknown>> = {};

  for (const route of table.list()) {
    const openapiPath = route.path.replace(/:([A-Za-z]+)/g, '{$1}').replace(/\{\/\*([A-Za-z]+)\}/g, '/{$1}');
    const parameters: unknown[] = [];
    for (const [location, schema] of [['path', route.params], ['query', route.query]] as const) {
      if (!schema) continue;
      const json = components.toSchema(schema, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
      for (const [name, { description, ...property }] of Object.entries(json.properties ?? {})) {
        parameters.push({
          name,
          in: location,
          required: location === 'path' || (json.required ?? []).includes(name),
          ...(description ? { description } : {}),
          schema: property,
        });
      }
    }
    for (const header of route.headers ?? []) {
      parameters.push({
        name: header.name,
        in: 'header',
        required: header.required,
        description: header.description,
        schema: { type: 'string', ...(header.pattern ? { pattern: header.pattern } : {}) },
      });
    }
    const responses: Record<string, unknown> = {};
    const keyed = route.auth !== false && !route.permission;
    for (const [status, response] of Object.entries(route.responses)) {
      const example = response.example === undefined ? {} : { example: response.example };
      responses[status] = {
        description: response.description,
        ...(keyed ? { headers: RATE_LIMIT_RESPONSE_HEADERS } : {}),
        ...(response.schema
          ? { content: { [response.contentType ?? 'application/json']: { schema: components.toSchema(response.schema, 'output'), ...example } } }
          : response.contentType
            ? { content: { [response.contentType]: { schema: BINARY_TYPES.has(response.contentType) ? { type: 'string', format: 'binary' } : { type: 'string' }, ...example } } }
            : {}),
      };
    }
    const byStatus = new Map<number, ErrorCode[]>();
    for (const code of routeErrorCodes(route)) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code]);
    for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
      responses[String(status)] = {
        description: `error codes: ${codes.map((code) => `\`${code}\``).join(', ')}`,
        ...(status === 429
          ? { headers: { 'Retry-After': { description: 'seconds to wait', schema: { type: 'integer' } }, ...(keyed ? RATE_LIMIT_RESPONSE_HEADERS : {}) } }
          : {}),
        content: { 'application/json': { schema: errorRef, example: errorExample(codes[0]!) } },
      };
    }
    (paths[openapiPath] ??= {})[route.method] = {
      operationId: route.operationId,
      tags: [route.tag],
      summary: route.summary,
      description: route.description,
      ...(route.auth === false ? { security: [] } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(route.body
        ? {
            requestBody: {
              required: true,
              content: {
                'application/json': {
                  schema: components.toSchema(route.body, 'input'),
                  ...(route.requestExample === undefined ? {} : { example: route.requestExample }),
                },
              },
            },
          }
        : route.streamBody
          ? {
              requestBody: {
                required: route.streamBody.required,
                description: route.streamBody.description,
                content: Object.fromEntries(route.streamBody.contentTypes.map((type) => [type, { schema: { type: 'string', format: 'binary' }, example: route.streamBody!.example }])),
              },
            }
          : route.rawBody
          ? {
              requestBody: {
                required: true,
                description: route.rawBody.description,
                content: Object.fromEntries(
                  (route.rawBody.contentTypes ?? ['application/json']).map((type) => [type, { schema: {}, example: route.rawBody!.example }]),
                ),
              },
            }
          : {}),
      responses,
    };
  }
  const tags = [...new Set(table.list().map((route) => route.tag))].sort().map((name) => ({ name, description: TAGS[name] ?? name }));
  if (info.plane === 'management') {
    return {
      openapi: '3.1.0',
      info: {
        title: 'Berth management API',
        version: info.version,
        description:
          'The management plane (the dashboard): sign in (`/api/auth/login` with the install\'s OpenID Connect provider, or a one-time link in embedded mode), ' +
          'then every route is authorized by the `berth_session` cookie and the caller\'s role in the organization. ' +
          'State-changing requests (POST, PUT, PATCH, DELETE) must send the session\'s CSRF token (`csrfToken` of `GET /api/me`, also in the `berth_csrf` cookie) in `X-CSRF-Token`. ' +
          'A role that lacks the permission gets 403 `forbidden`. Errors have the body `{ error: { code, message, details, requestId } }`.',
      },
      servers: [{ url: info.serverUrl ?? '/', description: info.serverUrl ? 'this install' : 'the host that served this document' }],
      security: [{ session: [], csrf: [] }],
      tags,
      paths: Object.fromEntries(
        Object.entries(paths).map(([path, methods]) => [
          path,
          Object.fromEntries(
            Object.entries(methods).map(([method, operation]) => [
              method,
              // Reading needs only the cookie; changing needs the CSRF header too.
              method === 'get' && (operation as { security?: unknown }).security === undefined ? { ...(operation as object), security: [{ session: [] }] } : operation,
            ]),
          ),
        ]),
      ),
      components: {
        securitySchemes: {
          session: { type: 'apiKey', in: 'cookie', name: 'berth_session', description: 'the sign-in session, set by sign-in' },
          csrf: { type: 'apiKey', in: 'header', name: 'X-CSRF-Token', description: 'the session\'s CSRF token, on POST, PUT, PATCH and DELETE' },
        },
        schemas: Object.fromEntries(Object.entries(components.schemas).sort(([a], [b]) => a.localeCompare(b))),
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Berth API',
      version: info.version,
      description:
        'Sandboxed compute for AI agents. Authenticate with `Authorization: Bearer <API key>`; ' +
        '`svc_live_` keys run real sandboxes, `svc_test_` keys get realistic mock results and never touch a provider. ' +
        'Every error has the body `{ error: { code, message, details, requestId } }` (the `Error` schema); clients branch on `error.code`. ' +
        'A method a path does not list answers 405 `method_not_allowed` with an `Allow` header. ' +
        'Requests with a key are limited per key by the organization\'s plan (a sliding window of 60 s): every answer carries ' +
        '`RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` and `RateLimit-Policy`; over the limit, 429 `rate_limited` with `Retry-After` and `details.retryAfter`.',
    },
    servers: [{ url: info.serverUrl ?? '/', description: info.serverUrl ? 'this install' : 'the host that served this document' }],
    security: [{ bearer: [] }],
    tags,
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'an API key: svc_live_… or svc_test_…' } },
      schemas: Object.fromEntries(Object.entries(components.schemas).sort(([a], [b]) => a.localeCompare(b))),
    },
  };
}

function errorExample(code: ErrorCode): unknown {
  return {
    error: {
      code,
      message: ERROR_MESSAGES[code] ?? code.replace(/_/g, ' '),
      details:
        code === 'unprocessable_entity'
          ? { fields: { userId: ['Too small: expected string to have >=1 characters'] } }
          : code === 'rate_limited'
            ? { retryAfter: 42, plan: 'free', limit: 60, windowSeconds: 60 }
            : {},
      requestId: 'req_01jq3v9k2m8x7c4d5e6f7g8h9j',
    },
  };
}

const ERROR_MESSAGES: Partial<Record<ErrorCode, string>> = {
  unauthorized: 'missing API key: send "Authorization: Bearer <API key>"',
  forbidden: 'your role (viewer) does not allow this (team.manage)',
  invalid_role: 'the owner role moves only by POST /api/team/transfer',
  already_member: 'user usr_01m80gqv2b7h3y9k0x1c4r5t6v is already a member or has a pending invite',
  transfer_to_pending: 'member mem_01m80gqv9d4kjqfcmvs2q4jxem has not accepted the invite yet',
  'auth/invalid_key': 'the API key is not valid',
  bad_request: 'the request could not be read',
  not_found: 'agent agt_01jq3v9k2m8x7c4d5e6f7g8h9j not found',
  conflict: 'the agent is not ready (status booting)',
  payload_too_large: 'the request body is larger than the 2 MiB limit',
  unsupported_media_type: 'the request body must be JSON, sent with "Content-Type: application/json"',
  unprocessable_entity: 'invalid body: userId: Too small: expected string to have >=1 characters',
  session_limit_exceeded: 'exec refused: the session reached its maxCost',
  internal_error: 'an unexpected error occurred; quote the requestId when reporting it',
  not_implemented: 'egress: provider "byoi-e2b" does not enforce egress policies yet (its sandboxes\' network is set by the install)',
  provider_error: 'provider "local" is unavailable',
  timeout: 'the code did not finish within 120 s',
  rate_limited: 'the free plan allows 60 requests a minute per API key; retry in 42 s',
};

const TAGS: Record<string, string> = {
  Sessions: 'One end-user of your application each; cost, limits and billing are scoped to them.',
  Agents: 'Sandboxes with a model loop: create, exec, run, stream, pause, resume, terminate.',
  'Agent definitions': 'Reusable, versioned agent configurations.',
  Snapshots: 'Checkpoints of paused agents, resumable as new agents.',
  'Warm pools': 'Sandboxes started ahead of the agents that claim them, for creation in milliseconds.',
  Usage: 'Costs and usage, in integer cents.',
  Secrets: 'Encrypted values injected into sandboxes as environment variables.',
  Providers: 'Bring your own compute or model keys (BYOI).',
  Webhooks: 'Signed event deliveries to your endpoints.',
  Widget: 'The chat widget script that websites embed for a `chat_embed` channel.',
  Triggers: 'Public URLs that run an agent definition on a signed request.',
  Channels: 'An agent definition answering people: a chat widget on your pages, Slack, email, phone; conversations keep their history.',
  Jobs: 'Runs of an agent definition started by a trigger or a schedule.',
  Files: "An agent sandbox's files: upload and download (streamed), list, stat, mkdir, move, delete, a directory as tar; paths confined to /workspace.",
  Ports: 'A port a program listens on inside the sandbox, exposed through the API server (HTTP and WebSocket), off until exposed.',
  System: 'Health, readiness, metrics and this document.',
  'Sign-in': 'Signing in and out of the management plane, the signed-in user and their invites.',
  Team: 'Members of the organization, their roles, invites and ownership.',
};
