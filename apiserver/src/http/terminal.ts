import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError, findApiKeysByIdOrPrefix, type Clock, type Logger, type Principal, type Queryable, type TerminalHandle } from '@berth/common';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { z } from 'zod';
import type { AgentService } from '../services/agents.js';
import { cwdSchema } from '../routes/schemas.js';
import { verifyBearerKey } from './auth.js';
import { toApiError } from './errors.js';
import { rawErrorResponse, type UpgradeListener } from './server.js';

/**
 * The terminal WebSocket (`GET /v1/agents/:id/pty`, ADR 39): a program on a pty in the sandbox,
 * its output as binary messages, input as binary messages or `{"type":"input"}`, and
 * `{"type":"resize"}`. Authenticated on the upgrade by the API key (bearer header) or by a
 * short-lived token (browsers cannot set headers on a WebSocket).
 */

/** How long a terminal token may be used after it was issued. */
export const TERMINAL_TOKEN_TTL_MS = 60_000;
/** Largest message a client may send (input pasted at once, say). */
const MAX_MESSAGE_BYTES = 1024 * 1024;

const tokenPayloadSchema = z.object({ a: z.string(), o: z.string(), m: z.enum(['live', 'test']), k: z.string(), e: z.number(), n: z.string() });

/**
 * Tokens for one terminal connection to one agent, signed by the install (stateless across
 * replicas), valid TERMINAL_TOKEN_TTL_MS; this process refuses a token it has seen used.
 */
export class TerminalTokens {
  private readonly used = new Map<string, number>();

  constructor(
    private readonly key: Buffer,
    private readonly clock: Clock,
  ) {}

  issue(principal: Principal, agentId: string): { token: string; expiresAt: string } {
    const expires = this.clock.now().getTime() + TERMINAL_TOKEN_TTL_MS;
    const payload = Buffer.from(
      JSON.stringify({ a: agentId, o: principal.organizationId, m: principal.mode, k: principal.keyId, e: expires, n: randomBytes(9).toString('base64url') }),
    ).toString('base64url');
    return { token: `pty_${payload}.${this.sign(payload)}`, expiresAt: new Date(expires).toISOString() };
  }

  /** The principal a token was issued to, for `agentId`; 401 for anything else. */
  redeem(token: string, agentId: string): Principal {
    const refused = new ApiError('unauthorized', 'the terminal token is not valid for this agent, has expired or was used already: ask POST /v1/agents/{id}/pty/token for another');
    const [payload, signature, ...rest] = token.startsWith('pty_') ? token.slice(4).split('.') : [];
    if (!payload || !signature || rest.length > 0) throw refused;
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(signature);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw refused;
    let parsed: z.infer<typeof tokenPayloadSchema>;
    try {
      parsed = tokenPayloadSchema.parse(JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')));
    } catch {
      throw refused;
    }
    const now = this.clock.now().getTime();
    for (const [nonce, expiry] of this.used) if (expiry < now) this.used.delete(nonce);
    if (parsed.a !== agentId || parsed.e < now || this.used.has(parsed.n)) throw refused;
    this.used.set(parsed.n, parsed.e);
    return { organizationId: parsed.o, mode: parsed.m, keyId: parsed.k };
  }

  private sign(payload: string): string {
    return createHmac('sha256', this.key).update('pty\n').update(payload).digest('base64url');
  }
}

const sizeSchema = z.coerce.number().int().min(1).max(1000);
const querySchema = z
  .object({
    token: z.string().max(1024).optional(),
    argv: z.union([z.string().min(1).max(4096).transform((value) => [value]), z.array(z.string().min(1).max(4096)).min(1).max(64)]).default(['bash']),
    rows: sizeSchema.default(24),
    cols: sizeSchema.default(80),
    cwd: cwdSchema.optional(),
  })
  .strict();

const clientMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('input'), data: z.string() }),
  z.object({ type: z.literal('resize'), rows: z.number().int().min(1).max(1000), cols: z.number().int().min(1).max(1000) }),
]);

export function terminalUpgrade(deps: { db: Queryable; agents: AgentService; tokens: TerminalTokens; log: Logger }): UpgradeListener {
  const server = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
  return (req, socket, head) => {
    void open(req, socket, head).catch((error: unknown) => {
      const apiError = toApiError(error, deps.log);
      if (socket.writable) socket.end(rawErrorResponse(apiError.code, apiError.message, apiError.details));
      else socket.destroy();
    });
  };

  async function open(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => undefined);
    const url = new URL(req.url ?? '/', 'http://upgrade.invalid');
    const match = /^\/v1\/agents\/([^/]+)\/pty$/.exec(url.pathname);
    if (req.method !== 'GET' || !match) throw new ApiError('not_found', `no WebSocket at ${req.method} ${url.pathname}; the terminal is GET /v1/agents/{id}/pty`);
    const agentId = decodeURIComponent(match[1]!);
    const raw: Record<string, string | string[]> = {};
    for (const key of new Set(url.searchParams.keys())) {
      const values = url.searchParams.getAll(key);
      raw[key] = values.length === 1 ? values[0]! : values;
    }
    const query = querySchema.safeParse(raw);
    if (!query.success) {
      throw new ApiError('unprocessable_entity', `query: ${query.error.issues.map((issue) => `${issue.path.join('.') || 'query'}: ${issue.message}`).join('; ')}`);
    }
    const { token, argv, rows, cols, cwd } = query.data;
    let principal: Principal;
    if (req.headers.authorization !== undefined || token === undefined) {
      const record = await verifyBearerKey(deps.db, req.headers.authorization);
      principal = { organizationId: record.organizationId, mode: record.mode, keyId: record.id };
    } else {
      principal = deps.tokens.redeem(token, agentId);
      // The key the token was issued to may have been revoked since.
      const key = (await findApiKeysByIdOrPrefix(deps.db, principal.keyId)).find((record) => record.id === principal.keyId);
      if (!key || key.revokedAt) throw new ApiError('auth/key_revoked', 'the API key this terminal token was issued to has been revoked');
    }
    const log = deps.log.child({ agentId, keyId: principal.keyId });
    // The program starts before the handshake, so that a refusal (409, 501) is an HTTP answer; its first output waits.
    const early: Buffer[] = [];
    let ws: WebSocket | undefined;
    const handle: TerminalHandle = await deps.agents.openTerminal(principal, agentId, {
      argv,
      cwd,
      rows,
      cols,
      onOutput: (chunk) => (ws ? ws.send(chunk, { binary: true }) : early.push(chunk)),
    });
    // A client gone before the handshake finished never gets a WebSocket: its program ends here.
    socket.once('close', () => {
      if (!ws) handle.close();
    });
    server.handleUpgrade(req, socket, head, (connected) => {
      ws = connected;
      log.info({ argv: argv[0] }, 'terminal opened');
      for (const chunk of early.splice(0)) connected.send(chunk, { binary: true });
      connected.on('message', (data: RawData, isBinary: boolean) => {
        const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
        if (isBinary) return handle.write(bytes);
        const message = clientMessageSchema.safeParse(safeJson(bytes.toString('utf8')));
        if (!message.success) {
          connected.send(JSON.stringify({ type: 'error', code: 'unprocessable_entity', message: 'a text message is {"type":"input","data":"..."} or {"type":"resize","rows":N,"cols":N}' }));
          return;
        }
        if (message.data.type === 'input') handle.write(Buffer.from(message.data.data, 'utf8'));
        else handle.resize(message.data.rows, message.data.cols);
      });
      connected.on('close', () => handle.close());
      handle.done.then(
        (result) => {
          if (connected.readyState !== connected.OPEN) return;
          connected.send(JSON.stringify({ type: 'exit', exitCode: result.exitCode, ...(result.signal !== undefined ? { signal: result.signal } : {}) }));
          connected.close(1000, 'exited');
        },
        (error: unknown) => {
          const apiError = toApiError(error, log);
          if (connected.readyState === connected.OPEN) {
            connected.send(JSON.stringify({ type: 'error', code: apiError.code, message: apiError.message }));
            connected.close(1011, 'failed');
          }
        },
      );
    });
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
