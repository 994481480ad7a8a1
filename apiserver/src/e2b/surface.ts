import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, findApiKeysByIdOrPrefix, type Logger, type Principal, type Queryable } from '@berth/common';
import type { NextFunction, Request, Response } from 'express';
import { Counter, type Registry } from 'prom-client';
import type { RateLimiter } from '../http/rate-limit.js';
import { verifyBearerKey } from '../http/auth.js';
import { toApiError } from '../http/errors.js';
import type { AgentService } from '../services/agents.js';
import { ConnectError, isStreamingRequest, parseEnvelopes, parseJson, readBody, sendStreamError, sendUnaryError, toConnectError } from './connect.js';
import { agentIdOf, E2bError, readJson, sendE2b, type ControlPlane } from './control-plane.js';
import type { ProcessService } from './process.js';
import type { EnvdTokens } from './tokens.js';

/**
 * Where the E2B-compatible surface is reached (ADR 44):
 * - its control plane under `/e2b` (the SDK's `E2B_API_URL=<berth>/e2b`), or at the root of
 *   `api.<domain>` (SDKs that only know `E2B_DOMAIN`);
 * - a sandbox's envd by the `E2b-Sandbox-Id` and `E2b-Sandbox-Port` headers on any path of the
 *   Berth host (`E2B_SANDBOX_URL=<berth>`), or by the host name `<port>-<sandboxId>.<domain>`.
 * The envd port is the only port: other ports need the port tunnel, which this surface has not.
 */

export const PREFIX = '/e2b';
export const ENVD_PORT = 49983;
/** Keep-alive events of a process stream when the client asks for none (`Keepalive-Ping-Interval`, seconds). */
const DEFAULT_KEEPALIVE_S = 50;

export interface SurfaceDeps {
  db: Queryable;
  agents: AgentService;
  controlPlane: ControlPlane;
  processes: ProcessService;
  tokens: EnvdTokens;
  rateLimiter?: RateLimiter | undefined;
  domain: string | null;
  metrics: Registry;
  log: Logger;
}

/** The API key of `X-API-Key`: a Berth key, or the same key behind `e2b_` (the form E2B's SDKs and docs show). */
export function berthKeyOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  return header.startsWith('e2b_') ? header.slice(4) : header;
}

function hostOf(req: IncomingMessage): string {
  return (req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
}

/**
 * envd's user (`Authorization: Basic <user>:`): programs run as the sandbox's one user (root in
 * its gVisor sandbox), which stands for E2B's default user `user` and for `root`; another name
 * is refused rather than run as someone else.
 */
export const ACCEPTED_USERS = ['user', 'root'];
function checkUser(header: string | undefined): void {
  if (header === undefined) return;
  const match = /^Basic\s+(\S+)$/i.exec(header);
  const user = match ? Buffer.from(match[1]!, 'base64').toString('utf8').split(':')[0] : undefined;
  if (user === undefined || !ACCEPTED_USERS.includes(user)) {
    throw new ConnectError('unimplemented', `Authorization: programs run as the sandbox's one user here, which stands for ${ACCEPTED_USERS.join(' and ')}; "${user ?? header}" is not one of them`);
  }
}

export function createE2bSurface(deps: SurfaceDeps) {
  const requests = new Counter({
    name: 'berth_e2b_requests_total',
    help: 'Requests to the E2B-compatible surface, by part (control plane or envd), operation and status',
    labelNames: ['part', 'operation', 'status'],
    registers: [deps.metrics],
  });
  const domain = deps.domain;
  const sandboxHost = domain ? new RegExp(`^(\\d{1,5})-([0-9a-z]{1,64})\\.${domain.replaceAll('.', '\\.')}$`) : undefined;

  async function principalOfKey(req: IncomingMessage, res: ServerResponse): Promise<Principal> {
    const key = berthKeyOf(req.headers['x-api-key'] as string | undefined);
    if (!key) throw new E2bError(401, 'missing API key: send X-API-Key with a Berth API key');
    let record;
    try {
      record = await verifyBearerKey(deps.db, `Bearer ${key}`);
    } catch (error) {
      if (error instanceof ApiError) throw new E2bError(401, error.message);
      throw error;
    }
    const principal = { organizationId: record.organizationId, mode: record.mode, keyId: record.id };
    await deps.rateLimiter?.admit(principal, res as Response);
    return principal;
  }

  function e2bFailure(error: unknown, log: Logger): E2bError {
    if (error instanceof E2bError) return error;
    const apiError = toApiError(error, log);
    return new E2bError(apiError.status === 422 ? 400 : apiError.status, apiError.message);
  }

  async function controlPlane(req: Request, res: Response, path: string): Promise<void> {
    const method = req.method.toUpperCase();
    let operation = 'unknown';
    try {
      const principal = await principalOfKey(req, res);
      const cp = deps.controlPlane;
      const query = Object.fromEntries(new URL(req.originalUrl, 'http://localhost').searchParams);
      let match: RegExpExecArray | null;
      let answer: { status: number; body?: unknown; headers?: Record<string, string> };
      if ((path === '/sandboxes' || path === '/v2/sandboxes') && method === 'POST') {
        operation = 'create';
        answer = await cp.create(principal, await readJson(req));
      } else if (path === '/sandboxes' && method === 'GET') {
        operation = 'list';
        answer = await cp.list(principal, query, 1);
      } else if (path === '/v2/sandboxes' && method === 'GET') {
        operation = 'list';
        answer = await cp.list(principal, query, 2);
      } else if ((match = /^\/sandboxes\/([^/]+)$/.exec(path)) && method === 'GET') {
        operation = 'get';
        answer = await cp.get(principal, decodeURIComponent(match[1]!));
      } else if ((match = /^\/sandboxes\/([^/]+)$/.exec(path)) && method === 'DELETE') {
        operation = 'kill';
        answer = await cp.kill(principal, decodeURIComponent(match[1]!));
      } else if ((match = /^\/sandboxes\/([^/]+)\/timeout$/.exec(path)) && method === 'POST') {
        operation = 'timeout';
        answer = await cp.setTimeout(principal, decodeURIComponent(match[1]!), await readJson(req));
      } else if ((match = /^\/sandboxes\/([^/]+)\/pause$/.exec(path)) && method === 'POST') {
        operation = 'pause';
        answer = await cp.pause(principal, decodeURIComponent(match[1]!), await readJson(req));
      } else if ((match = /^\/(?:v2\/)?sandboxes\/([^/]+)\/connect$/.exec(path)) && method === 'POST') {
        operation = 'connect';
        answer = await cp.connect(principal, decodeURIComponent(match[1]!), await readJson(req), 'connect');
      } else if ((match = /^\/sandboxes\/([^/]+)\/resume$/.exec(path)) && method === 'POST') {
        operation = 'resume';
        answer = await cp.connect(principal, decodeURIComponent(match[1]!), await readJson(req), 'resume');
      } else {
        throw new E2bError(404, `${method} ${path} is not part of the E2B-compatible API here (see docs/e2b-compatible.md)`);
      }
      requests.inc({ part: 'api', operation, status: answer.status });
      sendE2b(res, answer.status, answer.body, answer.headers);
    } catch (error) {
      const failure = e2bFailure(error, req.log);
      requests.inc({ part: 'api', operation, status: failure.status });
      if (!res.headersSent) sendE2b(res, failure.status, { code: failure.status, message: failure.message });
      else res.destroy();
    }
  }

  async function envd(req: Request, res: Response, sandboxId: string, port: number): Promise<void> {
    const path = new URL(req.originalUrl, 'http://localhost').pathname;
    const operation = path.startsWith('/process.Process/') ? path.slice('/process.Process/'.length) : path;
    try {
      if (port !== ENVD_PORT) throw new ConnectError('unavailable', `port ${port}: only envd's port ${ENVD_PORT} is reachable here (other ports need the port tunnel)`);
      const agentId = (() => {
        try {
          return agentIdOf(sandboxId);
        } catch {
          throw new ConnectError('not_found', `sandbox "${sandboxId}" not found`);
        }
      })();
      if (path === '/health' && req.method === 'GET') {
        requests.inc({ part: 'envd', operation: 'health', status: 204 });
        res.writeHead(204);
        res.end();
        return;
      }
      const principal = await principalOfToken(req, res, sandboxId);
      checkUser(req.headers.authorization);
      if (path.startsWith('/filesystem.Filesystem/') || path === '/files') {
        throw new ConnectError('unimplemented', 'the filesystem service and /files are not served yet (see docs/e2b-compatible.md)');
      }
      if (!path.startsWith('/process.Process/') || req.method !== 'POST') throw new ConnectError('not_found', `${req.method} ${path} is not an envd procedure here`);
      const keepaliveMs = (Number(req.headers['keepalive-ping-interval']) || DEFAULT_KEEPALIVE_S) * 1000;
      const body = await readBody(req);
      const streaming = isStreamingRequest(req);
      const single = () => {
        const messages = streaming ? parseEnvelopes(body) : [parseJson(body)];
        if (messages.length !== 1) throw new ConnectError('invalid_argument', 'one request message expected');
        return messages[0];
      };
      const p = deps.processes;
      switch (operation) {
        case 'Start':
          await p.start(res, principal, agentId, single(), keepaliveMs);
          break;
        case 'Connect':
          await p.connect(res, principal, agentId, single(), keepaliveMs);
          break;
        case 'List':
          await p.list(res, principal, agentId);
          break;
        case 'SendSignal':
          await p.sendSignal(res, principal, agentId, single());
          break;
        case 'SendInput':
          await p.sendInput(res, principal, agentId, single());
          break;
        case 'StreamInput':
          await p.streamInput(res, principal, agentId, streaming ? parseEnvelopes(body) : [parseJson(body)]);
          break;
        case 'CloseStdin':
          await p.closeStdin(res, principal, agentId, single());
          break;
        case 'Update':
          await p.update(res, principal, agentId, single());
          break;
        default:
          throw new ConnectError('unimplemented', `process.Process/${operation} is not a method of envd's process service`);
      }
      requests.inc({ part: 'envd', operation, status: res.statusCode });
    } catch (error) {
      // toApiError logs what is not a known error (and hides its message).
      const failure = error instanceof ConnectError ? error : toConnectError(toApiError(error, req.log));
      requests.inc({ part: 'envd', operation, status: failure.code });
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (isStreamingRequest(req)) sendStreamError(res, failure);
      else sendUnaryError(res, failure);
    }
  }

  /** The principal of a sandbox request: its envd access token, issued to a key that is still live. */
  async function principalOfToken(req: IncomingMessage, res: ServerResponse, sandboxId: string): Promise<Principal> {
    const token = req.headers['x-access-token'];
    const principal = typeof token === 'string' ? deps.tokens.verify(token, sandboxId) : undefined;
    if (!principal) throw new ConnectError('unauthenticated', 'X-Access-Token: missing, or not the envd access token of this sandbox');
    const [record] = await findApiKeysByIdOrPrefix(deps.db, principal.keyId);
    if (!record || record.revokedAt) throw new ConnectError('unauthenticated', 'the API key this token was issued to has been revoked');
    // envd's calls count against the key's rate limit, as exec on /v1 does.
    await deps.rateLimiter?.admit(principal, res as Response);
    return principal;
  }

  /** The middleware: answers what is the E2B surface's, passes the rest on. */
  return (req: Request, res: Response, next: NextFunction): void => {
    const headerSandbox = req.headers['e2b-sandbox-id'];
    if (typeof headerSandbox === 'string' && headerSandbox.length > 0) {
      void envd(req, res, headerSandbox.toLowerCase(), Number(req.headers['e2b-sandbox-port'] ?? ENVD_PORT));
      return;
    }
    const host = hostOf(req);
    const byHost = sandboxHost?.exec(host);
    if (byHost) {
      void envd(req, res, byHost[2]!, Number(byHost[1]));
      return;
    }
    const path = new URL(req.originalUrl, 'http://localhost').pathname;
    if (domain && host === `api.${domain}`) {
      void controlPlane(req, res, path);
      return;
    }
    if (path === PREFIX || path.startsWith(`${PREFIX}/`)) {
      void controlPlane(req, res, path.slice(PREFIX.length) || '/');
      return;
    }
    next();
  };
}
