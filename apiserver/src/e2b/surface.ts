import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError, findApiKeysByIdOrPrefix, type Logger, type Principal, type Queryable } from '@berth/common';
import type { NextFunction, Request, Response } from 'express';
import { Counter, type Registry } from 'prom-client';
import type { RateLimiter } from '../http/rate-limit.js';
import { findBearerKeyCounted } from '../http/auth.js';
import { toApiError } from '../http/errors.js';
import type { AgentService } from '../services/agents.js';
import { ConnectError, isStreamingRequest, parseEnvelopes, parseJson, readBody, sendStreamError, sendUnaryError, toConnectError } from './connect.js';
import { agentIdOf, E2bError, readJson, sendE2b, type ControlPlane } from './control-plane.js';
import type { FilesystemService } from './filesystem.js';
import { httpStatusOf } from './filesystem.js';
import type { SandboxPorts } from './ports.js';
import type { ProcessService } from './process.js';
import type { EnvdTokens } from './tokens.js';

/**
 * Where the E2B-compatible surface is reached (ADR 44):
 * - its control plane under `/e2b` (the SDK's `E2B_API_URL=<berth>/e2b`), or at the root of
 *   `api.<domain>` (SDKs that only know `E2B_DOMAIN`);
 * - a sandbox's envd by the `E2b-Sandbox-Id` and `E2b-Sandbox-Port` headers on any path of the
 *   Berth host (`E2B_SANDBOX_URL=<berth>`), or by the host name `<port>-<sandboxId>.<domain>`.
 * Other ports of the sandbox are passed to the program listening there (ports.ts).
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
  filesystem: FilesystemService;
  ports: SandboxPorts;
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

/** An error of envd's REST routes (`/files`) and of a port: `{code, message}` with the HTTP status. */
function sendFilesError(res: ServerResponse, error: ConnectError): void {
  const status = httpStatusOf(error);
  const body = JSON.stringify({ code: status, message: error.message });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
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
    let found;
    try {
      found = await findBearerKeyCounted(deps.db, deps.rateLimiter, `Bearer ${key}`);
    } catch (error) {
      if (error instanceof ApiError) throw new E2bError(401, error.message);
      throw error;
    }
    const { record, admit } = found;
    admit(res as Response);
    return { organizationId: record.organizationId, mode: record.mode, keyId: record.id };
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

  function sandboxAgentId(sandboxId: string): string {
    try {
      return agentIdOf(sandboxId);
    } catch {
      throw new ConnectError('not_found', `sandbox "${sandboxId}" not found`);
    }
  }

  async function envd(req: Request, res: Response, sandboxId: string, port: number): Promise<void> {
    const url = new URL(req.originalUrl, 'http://localhost');
    const path = url.pathname;
    const operation =
      port !== ENVD_PORT
        ? 'port'
        : path.startsWith('/process.Process/')
          ? path.slice('/process.Process/'.length)
          : path.startsWith('/filesystem.Filesystem/')
            ? `filesystem.${path.slice('/filesystem.Filesystem/'.length)}`
            : path;
    try {
      const agentId = sandboxAgentId(sandboxId);
      if (port !== ENVD_PORT) {
        if (!Number.isInteger(port) || port < 1 || port > 65535) throw new ConnectError('invalid_argument', `port ${port}: not a TCP port`);
        const principal = await principalOfToken(req, res, sandboxId, trafficToken(req));
        await deps.ports.http(req, res, principal, agentId, port);
        requests.inc({ part: 'port', operation, status: res.statusCode });
        return;
      }
      if (path === '/health' && req.method === 'GET') {
        requests.inc({ part: 'envd', operation: 'health', status: 204 });
        res.writeHead(204);
        res.end();
        return;
      }
      const principal = await principalOfToken(req, res, sandboxId, req.headers['x-access-token']);
      checkUser(req.headers.authorization);
      if (path === '/files') {
        const query = url.searchParams;
        const user = query.get('username');
        if (user !== null && !ACCEPTED_USERS.includes(user)) {
          throw new ConnectError('unimplemented', `username: programs run as the sandbox's one user here, which stands for ${ACCEPTED_USERS.join(' and ')}; "${user}" is not one of them`);
        }
        if (req.method === 'GET') await deps.filesystem.download(res, principal, agentId, query);
        else if (req.method === 'POST') await deps.filesystem.upload(req, res, principal, agentId, query);
        else throw new ConnectError('not_found', `${req.method} /files: envd's /files takes GET and POST`);
        requests.inc({ part: 'envd', operation: `files.${req.method}`, status: res.statusCode });
        return;
      }
      const keepaliveMs = (Number(req.headers['keepalive-ping-interval']) || DEFAULT_KEEPALIVE_S) * 1000;
      if (path.startsWith('/filesystem.Filesystem/') && req.method === 'POST') {
        const method = path.slice('/filesystem.Filesystem/'.length);
        const body = await readBody(req);
        if (isStreamingRequest(req)) {
          // WatchDir is the service's one stream.
          const messages = parseEnvelopes(body);
          if (method !== 'WatchDir') throw new ConnectError('unimplemented', `filesystem.Filesystem/${method} is not a server stream (send it as application/json)`);
          if (messages.length !== 1) throw new ConnectError('invalid_argument', 'one request message expected');
          await deps.filesystem.watchDir(res, principal, agentId, messages[0], keepaliveMs);
        } else {
          await deps.filesystem.call(res, principal, agentId, method, parseJson(body));
        }
        requests.inc({ part: 'envd', operation, status: res.statusCode });
        return;
      }
      if (!path.startsWith('/process.Process/') || req.method !== 'POST') throw new ConnectError('not_found', `${req.method} ${path} is not an envd procedure here`);
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
      requests.inc({ part: port !== ENVD_PORT ? 'port' : 'envd', operation, status: failure.code });
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (port !== ENVD_PORT || path === '/files') sendFilesError(res, failure);
      else if (isStreamingRequest(req)) sendStreamError(res, failure);
      else sendUnaryError(res, failure);
    }
  }

  /** The principal of a sandbox request: its envd access token, issued to a key that is still live. */
  async function principalOfToken(req: IncomingMessage, res: ServerResponse | undefined, sandboxId: string, token: string | string[] | undefined): Promise<Principal> {
    const principal = typeof token === 'string' ? deps.tokens.verify(token, sandboxId) : undefined;
    if (!principal) throw new ConnectError('unauthenticated', 'X-Access-Token (or, for ports, e2b-traffic-access-token): missing, or not the access token of this sandbox');
    const [record] = await findApiKeysByIdOrPrefix(deps.db, principal.keyId);
    if (!record || record.revokedAt) throw new ConnectError('unauthenticated', 'the API key this token was issued to has been revoked');
    // envd's calls count against the key's rate limit, as exec on /v1 does.
    if (res) await deps.rateLimiter?.admit(principal, res as Response);
    return principal;
  }

  /** The token of a request to a port: E2B's traffic token header, else envd's. */
  function trafficToken(req: IncomingMessage): string | string[] | undefined {
    return req.headers['e2b-traffic-access-token'] ?? req.headers['x-access-token'];
  }

  /** The sandbox and port an upgrade request is for, by header or host name (undefined: not the surface's). */
  function upgradeTarget(req: IncomingMessage): { sandboxId: string; port: number } | undefined {
    const headerSandbox = req.headers['e2b-sandbox-id'];
    if (typeof headerSandbox === 'string' && headerSandbox.length > 0) return { sandboxId: headerSandbox.toLowerCase(), port: Number(req.headers['e2b-sandbox-port'] ?? ENVD_PORT) };
    const byHost = sandboxHost?.exec(hostOf(req));
    return byHost ? { sandboxId: byHost[2]!, port: Number(byHost[1]) } : undefined;
  }

  /** An upgrade (WebSocket) to a sandbox's port; envd's own port takes none. */
  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => undefined);
    const target = upgradeTarget(req)!;
    void (async () => {
      if (target.port === ENVD_PORT) throw new ConnectError('unimplemented', "envd's port takes no upgrade here");
      if (!Number.isInteger(target.port) || target.port < 1 || target.port > 65535) throw new ConnectError('invalid_argument', `port ${target.port}: not a TCP port`);
      const agentId = sandboxAgentId(target.sandboxId);
      const principal = await principalOfToken(req, undefined, target.sandboxId, trafficToken(req));
      await deps.ports.upgrade(req, socket, head, principal, agentId, target.port);
    })().catch((error: unknown) => {
      deps.ports.refused();
      const failure = error instanceof ConnectError ? error : toConnectError(toApiError(error, deps.log));
      const body = JSON.stringify({ code: httpStatusOf(failure), message: failure.message });
      if (socket.writable) socket.end(`HTTP/1.1 ${httpStatusOf(failure)} ${STATUS_CODES[httpStatusOf(failure)] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
      else socket.destroy();
    });
  }

  /** The middleware: answers what is the E2B surface's, passes the rest on. */
  const middleware = (req: Request, res: Response, next: NextFunction): void => {
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
  return Object.assign(middleware, {
    /** Whether an upgrade request is for a sandbox's port through the surface. */
    matchesUpgrade: (req: IncomingMessage): boolean => upgradeTarget(req) !== undefined,
    upgrade,
  });
}
