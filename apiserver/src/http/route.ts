import { ApiError, type ErrorCode } from '@berth/common';
import express, { type Request, type RequestHandler, type Response, type Router } from 'express';
import { z } from 'zod';
import type { Caller, Principal } from './context.js';
import type { Permission } from '../management/permissions.js';
import { validationError } from './errors.js';
import { inspectInput } from './input.js';

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface HandlerContext<P, Q, B> {
  req: Request;
  res: Response;
  params: P;
  query: Q;
  body: B;
  /** Present on every key-authenticated (`/v1`) route. */
  principal: Principal;
  /** Present on every cookie-authorized (`/api`) route. */
  caller: Caller;
}

/** A JSON reply; a handler that streams or writes text itself returns nothing. */
export interface Reply {
  status: number;
  body: unknown;
}

export interface RouteSpec<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> {
  method: Method;
  /** Express-style path: `/v1/agents/:id`. */
  path: string;
  operationId: string;
  tag: string;
  summary: string;
  description: string;
  /** Routes need an API key (`/v1`) or a signed-in user (`/api`) unless they say otherwise. */
  auth?: boolean;
  /**
   * Management (`/api`) routes: the permission of the spec's table the caller's role must hold
   * in the session's organization, or `signed-in` for routes any signed-in user may call (their
   * own invites, sign-out).
   */
  permission?: Permission | 'signed-in';
  params?: P;
  query?: Q;
  body?: B;
  /**
   * The body as the bytes that arrived (a Buffer in `req.body`; undefined when none), unparsed and
   * at most `limitBytes`: for a route that checks a signature over them before reading them.
   * Exclusive with `body`; the route reads and validates them itself.
   */
  rawBody?: { limitBytes: number; description: string; example: unknown; contentTypes?: string[] };
  /**
   * The body is read by the handler as a stream (`req`), of any size and not held in memory: an
   * upload, a proxied request. No body parser touches it. Exclusive with `body` and `rawBody`.
   */
  streamBody?: { description: string; contentTypes: string[]; required: boolean; example: string };
  /** Request headers the route reads itself, for the docs (the route answers for a missing or bad one). */
  headers?: { name: string; required: boolean; description: string; pattern?: string }[];
  /** `example`: a realistic answer, shown in the OpenAPI document and checked against `schema` by the tests. */
  responses: Record<number, { description: string; schema?: z.ZodType; contentType?: string; example?: unknown }>;
  /** A realistic request body, shown in the OpenAPI document. */
  requestExample?: z.input<B>;
  /** Error codes this route can answer with, for the docs. */
  errors: ErrorCode[];
  handler(context: HandlerContext<z.output<P>, z.output<Q>, z.output<B>>): Promise<Reply | void>;
}

// Erased form kept in the table; `defineRoute` keeps the typed one for the handler.
type AnyRoute = RouteSpec<any, any, any>;

export function defineRoute<
  P extends z.ZodType = z.ZodObject<{}>,
  Q extends z.ZodType = z.ZodObject<{}>,
  B extends z.ZodType = z.ZodUndefined,
>(spec: RouteSpec<P, Q, B>): RouteSpec<P, Q, B> {
  return spec;
}

export const AUTH_ERRORS: ErrorCode[] = ['unauthorized', 'auth/invalid_key', 'auth/key_revoked'];
/** Management routes: not signed in (401), or signed in without the role, the membership or the CSRF token (403). */
export const SESSION_AUTH_ERRORS: ErrorCode[] = ['unauthorized', 'forbidden'];

function parseOrThrow<T extends z.ZodType>(schema: T | undefined, value: unknown, location: 'body' | 'query' | 'params'): z.output<T> {
  if (!schema) return value as z.output<T>;
  const result = schema.safeParse(value);
  if (!result.success) throw validationError(result.error, location);
  return result.data;
}

function readBody(req: Request): unknown {
  if (req.body !== undefined) return req.body;
  const length = Number(req.get('content-length') ?? 0);
  const chunked = req.get('transfer-encoding') !== undefined;
  if ((length > 0 || chunked) && !req.is('application/json')) {
    throw new ApiError('unsupported_media_type', 'the request body must be JSON, sent with "Content-Type: application/json"', {
      contentType: req.get('content-type') ?? null,
    });
  }
  return {};
}

/**
 * Routes and their documentation in one place: each route's zod schemas validate the
 * request, shape the response (only fields in the schema leave the server) and become
 * the OpenAPI document, so the docs cannot drift from behaviour.
 */
export class RouteTable {
  private readonly routes: AnyRoute[] = [];

  add(...routes: AnyRoute[]): this {
    this.routes.push(...routes);
    return this;
  }

  list(): readonly AnyRoute[] {
    return this.routes;
  }

  /**
   * Readers of the paths whose route takes its body raw, to run before the JSON parser: a body
   * read here is not read again (the JSON parser skips a request whose body has been consumed).
   * Every method of such a path reads raw, so that a method it does not take meets its 405, not
   * the JSON parser's opinion of the body.
   */
  rawBodyReaders(): Router {
    const router = express.Router();
    for (const route of this.routes) {
      if (route.rawBody) router.all(route.path, express.raw({ type: () => true, limit: route.rawBody.limitBytes }));
    }
    return router;
  }

  /** Whether the request is for a route that reads its body as a stream (the JSON parser then leaves it alone). */
  streamsBody(req: Request): boolean {
    return req.berthStreamBody === true;
  }

  /** Marks the requests of routes that stream their body, before any body parser runs. */
  streamBodyMarkers(): Router {
    const router = express.Router();
    for (const route of this.routes) {
      if (route.streamBody) {
        router.all(route.path, (req, _res, next) => {
          req.berthStreamBody = true;
          next();
        });
      }
    }
    return router;
  }

  /** `guards(route)`: the handlers that run before the route's own (authentication, authorization). */
  mount(router: Router, guards: (route: AnyRoute) => RequestHandler[]): void {
    for (const route of this.routes) {
      const handle: RequestHandler = async (req, res) => {
        const params = parseOrThrow(route.params, inspected(req.params, 'params'), 'params');
        const query = parseOrThrow(route.query, inspected(req.query, 'query'), 'query');
        const body = route.body ? parseOrThrow(route.body, inspected(readBody(req), 'body'), 'body') : undefined;
        const reply = await route.handler({ req, res, params, query, body, principal: req.principal!, caller: req.caller! });
        if (!reply) return;
        const schema = route.responses[reply.status]?.schema;
        // A response that does not match its schema is our bug: it must not reach the client half-right.
        res.status(reply.status).json(schema ? schema.parse(reply.body) : reply.body);
      };
      router[route.method](route.path, ...guards(route), handle);
    }
    // Registered after every route: a path that exists but not with this method (OPTIONS included) is a 405.
    for (const [path, methods] of this.methodsByPath()) {
      const allow = methods.join(', ');
      router.all(path, (req, res) => {
        res.setHeader('Allow', allow);
        throw new ApiError('method_not_allowed', `${req.method} is not allowed on ${path}; allowed: ${allow}`, {
          method: req.method,
          allow: methods,
        });
      });
    }
  }

  /** Each path with the methods it answers (HEAD wherever GET is), in the order of the table. */
  methodsByPath(): Map<string, string[]> {
    const byPath = new Map<string, string[]>();
    for (const route of this.routes) {
      const methods = byPath.get(route.path) ?? [];
      methods.push(route.method.toUpperCase());
      if (route.method === 'get') methods.push('HEAD');
      byPath.set(route.path, methods);
    }
    return byPath;
  }
}

function inspected<T>(value: T, location: 'body' | 'query' | 'params'): T {
  inspectInput(value, location);
  return value;
}
