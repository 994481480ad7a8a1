import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { PortClosedError, type Principal } from '@berth/common';
import { Counter, Gauge, type Registry } from 'prom-client';
import { HOP_BY_HOP, relayHttp, relayUpgrade } from '../http/relay.js';
import type { AgentService } from '../services/agents.js';
import { ConnectError } from './connect.js';

/**
 * A sandbox's ports other than envd's (ADR 44): `<port>-<sandboxId>.<domain>` (what the SDK's
 * `getHost(port)` names) or the `E2b-Sandbox-Port` header, passed to the port on the sandbox's
 * loopback through the provider's `openPort` (ADR 40: the launcher connects inside the sandbox,
 * which keeps no network). HTTP and upgrades (WebSocket) both. The caller shows the sandbox's
 * access token, as E2B asks of a sandbox whose public traffic is off: Berth never serves a
 * sandbox's port to whoever knows its address.
 */

/** Headers of the E2B surface itself (routing and its credentials), never passed to the program. */
const SURFACE_HEADERS = new Set(['x-access-token', 'e2b-traffic-access-token', 'e2b-sandbox-id', 'e2b-sandbox-port', 'x-api-key']);

export function forwardedHeaders(req: IncomingMessage, port: number, keep: string[] = []): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name === 'host' || SURFACE_HEADERS.has(name) || (HOP_BY_HOP.has(name) && !keep.includes(name))) continue;
    headers[name] = value;
  }
  headers.host = `127.0.0.1:${port}`;
  headers['x-forwarded-host'] = req.headers.host ?? '';
  headers['x-forwarded-for'] = req.socket.remoteAddress ?? '';
  if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = req.headers['transfer-encoding'];
  return headers;
}

export function createSandboxPorts(deps: { agents: AgentService; metrics: Registry }) {
  const open = new Gauge({ name: 'berth_e2b_port_tunnels_open', help: "Connections to sandboxes' ports open through the E2B-compatible surface now", labelNames: ['kind'], registers: [deps.metrics] });
  const requests = new Counter({
    name: 'berth_e2b_port_requests_total',
    help: "Requests to sandboxes' ports through the E2B-compatible surface, by kind and outcome",
    labelNames: ['kind', 'result'],
    registers: [deps.metrics],
  });

  async function tunnel(principal: Principal, agentId: string, port: number): Promise<Duplex> {
    const { sandbox, provider, release } = await deps.agents.ready(principal, agentId, 'a port');
    try {
      if (!provider.openPort) throw new ConnectError('unimplemented', `ports: provider "${provider.name}" cannot reach ports in its sandboxes`);
      const connection = await provider.openPort(sandbox, port);
      // The connection is the agent's traffic while it is open (ADR 45).
      connection.once('close', release);
      return connection;
    } catch (error) {
      release();
      if (error instanceof PortClosedError) throw new ConnectError('unavailable', `nothing listens on port ${port} in the sandbox (a program must listen on 127.0.0.1 or 0.0.0.0 there)`);
      throw error;
    }
  }

  return {
    /** An HTTP request to the port, its body and answer streamed through. */
    async http(req: IncomingMessage, res: ServerResponse, principal: Principal, agentId: string, port: number): Promise<void> {
      const connection = await tunnel(principal, agentId, port);
      open.inc({ kind: 'http' });
      await relayHttp(req, res, connection, {
        path: (req as { originalUrl?: string }).originalUrl ?? req.url ?? '/',
        headers: forwardedHeaders(req, port),
        onResult: (result) => {
          open.dec({ kind: 'http' });
          requests.inc({ kind: 'http', result });
        },
        errorResponse: (error) => ({
          status: 502,
          contentType: 'application/json',
          body: JSON.stringify({ code: 502, message: `the program on port ${port} did not answer over HTTP: ${error.message}` }),
        }),
      });
    },

    /** An upgrade (WebSocket) to the port: the request passed on, then bytes both ways. */
    async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, principal: Principal, agentId: string, port: number): Promise<void> {
      const connection = await tunnel(principal, agentId, port);
      open.inc({ kind: 'websocket' });
      requests.inc({ kind: 'websocket', result: 'opened' });
      relayUpgrade(req, socket, head, connection, req.url ?? '/', forwardedHeaders(req, port, ['connection', 'upgrade']), () => open.dec({ kind: 'websocket' }));
    },

    refused(): void {
      requests.inc({ kind: 'websocket', result: 'refused' });
    },
  };
}
export type SandboxPorts = ReturnType<typeof createSandboxPorts>;
