import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError, PortClosedError, findApiKeysByIdOrPrefix, type Logger, type Queryable } from '@berth/common';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { AgentService } from '../services/agents.js';
import { proxyPath, type PortService } from '../services/ports.js';
import type { Principal } from './context.js';
import { verifyBearerKey } from './auth.js';
import { toApiError } from './errors.js';
import { HOP_BY_HOP, relayHttp, relayUpgrade } from './relay.js';
import { rawErrorResponse, type UpgradeListener } from './server.js';

/**
 * The proxy to a port inside an agent's sandbox (ADR 40): `/v1/agents/{id}/ports/{port}/proxy/…`,
 * HTTP and WebSocket, each request over a tunnel its launcher makes to 127.0.0.1:port inside the
 * sandbox (the sandbox keeps no network). Authenticated by the API key (bearer) or, for browsers,
 * a port token: `?berth_token=` once, which becomes a cookie scoped to the port's path. The key
 * and the token never reach the program in the sandbox.
 */

export const PORT_TOKEN_PARAM = 'berth_token';
export const PORT_COOKIE = 'berth_port_token';
const PROXY_URL = /^\/v1\/agents\/([^/?]+)\/ports\/([0-9]{1,5})\/proxy(\/[^?]*)?(\?.*)?$/;

export interface ProxyTarget {
  agentId: string;
  port: number;
  /** The path inside the sandbox's server, with the query less the token. */
  path: string;
  token: string | undefined;
}

export function proxyTarget(url: string): ProxyTarget | undefined {
  const match = PROXY_URL.exec(url);
  if (!match) return undefined;
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return undefined;
  const search = new URLSearchParams(match[4] ?? '');
  const token = search.get(PORT_TOKEN_PARAM) ?? undefined;
  search.delete(PORT_TOKEN_PARAM);
  const query = search.toString();
  let agentId: string;
  try {
    agentId = decodeURIComponent(match[1]!);
  } catch {
    return undefined;
  }
  return { agentId, port, path: `${match[3] ?? '/'}${query ? `?${query}` : ''}`, token };
}

function cookieOf(headers: IncomingHttpHeaders, name: string): string | undefined {
  for (const part of (headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The request's headers for the program in the sandbox: no hop-by-hop ones, no credentials of Berth. */
function forwardedHeaders(req: IncomingMessage, target: ProxyTarget, keep: string[] = []): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name === 'authorization' || name === 'host' || (HOP_BY_HOP.has(name) && !keep.includes(name))) continue;
    headers[name] = value;
  }
  const cookies = (req.headers.cookie ?? '')
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part && !part.startsWith(`${PORT_COOKIE}=`));
  if (cookies.length) headers.cookie = cookies.join('; ');
  else delete headers.cookie;
  headers.host = `127.0.0.1:${target.port}`;
  headers['x-forwarded-prefix'] = proxyPath(target.agentId, target.port).slice(0, -1);
  headers['x-forwarded-for'] = req.socket.remoteAddress ?? '';
  if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = req.headers['transfer-encoding'];
  return headers;
}

export function createPortProxy(deps: { db: Queryable; agents: AgentService; ports: PortService; log: Logger; metrics: Registry; secureCookies: boolean }) {
  const open = new Gauge({ name: 'berth_port_tunnels_open', help: 'Connections to ports inside sandboxes open through the proxy now', labelNames: ['kind'], registers: [deps.metrics] });
  const requests = new Counter({ name: 'berth_port_proxy_requests_total', help: 'Requests to ports inside sandboxes through the proxy, by outcome', labelNames: ['kind', 'result'], registers: [deps.metrics] });

  async function authenticate(req: IncomingMessage, target: ProxyTarget): Promise<{ principal: Principal; tokenExpiresAt?: number }> {
    if (req.headers.authorization !== undefined) {
      const record = await verifyBearerKey(deps.db, req.headers.authorization);
      return { principal: { organizationId: record.organizationId, mode: record.mode, keyId: record.id } };
    }
    const token = target.token ?? cookieOf(req.headers, PORT_COOKIE);
    if (token === undefined) throw new ApiError('unauthorized', 'send "Authorization: Bearer <API key>", or open the URL of POST /v1/agents/{id}/ports/{port}/token (browsers)');
    const { principal, expiresAt } = deps.ports.redeemToken(decodeURIComponent(token), target.agentId, target.port);
    const key = (await findApiKeysByIdOrPrefix(deps.db, principal.keyId)).find((record) => record.id === principal.keyId);
    if (!key || key.revokedAt) throw new ApiError('auth/key_revoked', 'the API key this port token was issued to has been revoked');
    return { principal, tokenExpiresAt: expiresAt };
  }

  /**
   * The tunnel to the port, once the caller may use it and the port is exposed. An agent paused by
   * its idle policy is woken first (ADR 45), and the tunnel counts as its traffic while it is open.
   */
  async function connect(principal: Principal, target: ProxyTarget): Promise<Duplex> {
    await deps.ports.assertExposed(principal, target.agentId, target.port);
    const { sandbox, provider, release } = await deps.agents.ready(principal, target.agentId, 'a port');
    let tunnel: Duplex;
    try {
      if (!provider.openPort) throw new ApiError('not_implemented', `ports: provider "${provider.name}" cannot reach ports in its sandboxes`, { field: 'ports', provider: provider.name });
      tunnel = await provider.openPort(sandbox, target.port);
    } catch (error) {
      release();
      if (error instanceof PortClosedError) throw new ApiError('provider_error', `${error.message}: start the program that listens on it`, { port: target.port, reason: 'port_closed' });
      throw error;
    }
    tunnel.once('close', release);
    return tunnel;
  }

  return {
    /** An HTTP request to the port: its body and its answer streamed through. */
    async http(req: IncomingMessage, res: ServerResponse): Promise<void> {
      const target = proxyTarget((req as { originalUrl?: string }).originalUrl ?? req.url ?? '');
      if (!target) throw new ApiError('not_found', 'not a port proxy URL: /v1/agents/{id}/ports/{port}/proxy/…');
      const { principal, tokenExpiresAt } = await authenticate(req, target);
      if (target.token !== undefined && tokenExpiresAt !== undefined && (req.method === 'GET' || req.method === 'HEAD')) {
        // The token becomes a cookie for the port's path, and the address loses it (no token in history or the program's logs).
        const path = proxyPath(target.agentId, target.port);
        const cookie = `${PORT_COOKIE}=${encodeURIComponent(target.token)}; Path=${path}; HttpOnly; SameSite=Lax; Max-Age=${Math.max(1, Math.floor((tokenExpiresAt - Date.now()) / 1000))}${deps.secureCookies ? '; Secure' : ''}`;
        res.writeHead(303, { Location: `${path.slice(0, -1)}${target.path}`, 'Set-Cookie': cookie, 'Content-Length': '0' }).end();
        requests.inc({ kind: 'http', result: 'token' });
        return;
      }
      const tunnel = await connect(principal, target);
      open.inc({ kind: 'http' });
      await relayHttp(req, res, tunnel, {
        path: target.path,
        headers: forwardedHeaders(req, target),
        onResult: (result) => {
          open.dec({ kind: 'http' });
          requests.inc({ kind: 'http', result });
        },
        errorResponse: (error) => {
          const apiError = new ApiError('provider_error', `the program on port ${target.port} did not answer over HTTP: ${error.message}`, { port: target.port });
          const envelope = { error: { code: apiError.code, message: apiError.message, details: apiError.details, requestId: (req as { requestId?: string }).requestId ?? '' } };
          return { status: apiError.status, contentType: 'application/json; charset=utf-8', body: JSON.stringify(envelope) };
        },
      });
    },

    /** Whether an upgrade request is for the proxy. */
    matches(url: string | undefined): boolean {
      return proxyTarget(url ?? '') !== undefined;
    },

    /** A WebSocket (or any upgrade) to the port: the request passed on, then bytes both ways. */
    upgrade: ((req, socket, head) => {
      socket.on('error', () => undefined);
      const target = proxyTarget(req.url ?? '')!;
      void (async () => {
        const { principal } = await authenticate(req, target);
        const tunnel = await connect(principal, target);
        open.inc({ kind: 'websocket' });
        requests.inc({ kind: 'websocket', result: 'opened' });
        relayUpgrade(req, socket, head, tunnel, target.path, forwardedHeaders(req, target, ['connection', 'upgrade']), () => open.dec({ kind: 'websocket' }));
      })().catch((error: unknown) => {
        requests.inc({ kind: 'websocket', result: 'refused' });
        const apiError = toApiError(error, deps.log);
        if (socket.writable) socket.end(rawErrorResponse(apiError.code, apiError.message, apiError.details));
        else socket.destroy();
      });
    }) satisfies UpgradeListener,
  };
}
export type PortProxy = ReturnType<typeof createPortProxy>;
