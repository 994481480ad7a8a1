import { createHmac, timingSafeEqual } from 'node:crypto';
import { ApiError, type Clock, type Queryable } from '@berth/common';
import { z } from 'zod';
import type { Principal } from '../http/context.js';
import type { AgentService } from './agents.js';

/**
 * Ports of an agent's sandbox exposed through the API server's proxy (ADR 40). Off by default: a
 * port is reachable only while exposed, by the agent's organization and mode. Browsers, which
 * cannot send the API key, use a signed token bound to the agent and port.
 */

/** How long a port token (for browsers) may be used after it was issued. */
export const PORT_TOKEN_TTL_MS = 60 * 60 * 1000;
/** Ports an agent may have exposed at once. */
export const MAX_EXPOSED_PORTS = 20;

export interface ExposedPort {
  port: number;
  createdAt: string;
}

const tokenPayloadSchema = z.object({ a: z.string(), p: z.number().int(), o: z.string(), m: z.enum(['live', 'test']), k: z.string(), e: z.number() });

/** The proxy's path of an agent's port. */
export function proxyPath(agentId: string, port: number): string {
  return `/v1/agents/${encodeURIComponent(agentId)}/ports/${port}/proxy/`;
}

export function createPortService(deps: { db: Queryable; agents: AgentService; clock: Clock; key: Buffer }) {
  const sign = (payload: string) => createHmac('sha256', deps.key).update('port\n').update(payload).digest('base64url');

  return {
    async expose(principal: Principal, agentId: string, port: number): Promise<ExposedPort & { created: boolean }> {
      await deps.agents.find(principal, agentId);
      const { rows } = await deps.db.query<{ port: number; created_at: Date; inserted: boolean }>(
        `WITH existing AS (SELECT count(*)::int AS n FROM agent_ports WHERE agent_id = $1 AND port <> $2),
              inserted AS (
                INSERT INTO agent_ports (agent_id, port, organization_id, mode, created_at)
                SELECT $1, $2, $3, $4, $5 FROM existing WHERE existing.n < $6
                ON CONFLICT (agent_id, port) DO NOTHING
                RETURNING port, created_at)
         SELECT port, created_at, true AS inserted FROM inserted
         UNION ALL SELECT port, created_at, false FROM agent_ports WHERE agent_id = $1 AND port = $2`,
        [agentId, port, principal.organizationId, principal.mode, deps.clock.now(), MAX_EXPOSED_PORTS],
      );
      const row = rows[0];
      if (!row) throw new ApiError('conflict', `agent ${agentId} has ${MAX_EXPOSED_PORTS} ports exposed already; close one first`, { limit: MAX_EXPOSED_PORTS });
      return { port: row.port, createdAt: row.created_at.toISOString(), created: rows.some((r) => r.inserted) };
    },

    async list(principal: Principal, agentId: string): Promise<ExposedPort[]> {
      await deps.agents.find(principal, agentId);
      const { rows } = await deps.db.query<{ port: number; created_at: Date }>(
        'SELECT port, created_at FROM agent_ports WHERE agent_id = $1 AND organization_id = $2 AND mode = $3 ORDER BY port',
        [agentId, principal.organizationId, principal.mode],
      );
      return rows.map((row) => ({ port: row.port, createdAt: row.created_at.toISOString() }));
    },

    /** Closes the port to the proxy (connections already open through it stay until they end). */
    async close(principal: Principal, agentId: string, port: number): Promise<void> {
      await deps.agents.find(principal, agentId);
      const { rowCount } = await deps.db.query('DELETE FROM agent_ports WHERE agent_id = $1 AND port = $2 AND organization_id = $3 AND mode = $4', [
        agentId,
        port,
        principal.organizationId,
        principal.mode,
      ]);
      if (!rowCount) throw new ApiError('not_found', `port ${port} of agent ${agentId} is not exposed`);
    },

    /** 404 unless the port is exposed for this principal's organization and mode. */
    async assertExposed(principal: Principal, agentId: string, port: number): Promise<void> {
      const { rowCount } = await deps.db.query('SELECT 1 FROM agent_ports WHERE agent_id = $1 AND port = $2 AND organization_id = $3 AND mode = $4', [
        agentId,
        port,
        principal.organizationId,
        principal.mode,
      ]);
      if (!rowCount) throw new ApiError('not_found', `port ${port} of agent ${agentId} is not exposed: POST /v1/agents/{id}/ports with {"port": ${port}} first`, { port });
    },

    /** A token for one agent's port, for browsers (valid PORT_TOKEN_TTL_MS, any number of requests). */
    issueToken(principal: Principal, agentId: string, port: number): { token: string; expiresAt: string } {
      const expires = deps.clock.now().getTime() + PORT_TOKEN_TTL_MS;
      const payload = Buffer.from(JSON.stringify({ a: agentId, p: port, o: principal.organizationId, m: principal.mode, k: principal.keyId, e: expires })).toString('base64url');
      return { token: `prt_${payload}.${sign(payload)}`, expiresAt: new Date(expires).toISOString() };
    },

    /** The principal a token was issued to, with its expiry; 401 for a token not valid for this agent and port. */
    redeemToken(token: string, agentId: string, port: number): { principal: Principal; expiresAt: number } {
      const refused = new ApiError('unauthorized', 'the port token is not valid for this agent and port, or has expired: ask POST /v1/agents/{id}/ports/{port}/token for another');
      const [payload, signature, ...rest] = token.startsWith('prt_') ? token.slice(4).split('.') : [];
      if (!payload || !signature || rest.length > 0) throw refused;
      const expected = Buffer.from(sign(payload));
      const given = Buffer.from(signature);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw refused;
      let parsed: z.infer<typeof tokenPayloadSchema>;
      try {
        parsed = tokenPayloadSchema.parse(JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')));
      } catch {
        throw refused;
      }
      if (parsed.a !== agentId || parsed.p !== port || parsed.e < deps.clock.now().getTime()) throw refused;
      return { principal: { organizationId: parsed.o, mode: parsed.m, keyId: parsed.k }, expiresAt: parsed.e };
    },
  };
}
export type PortService = ReturnType<typeof createPortService>;
