import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Berth } from './client.js';
import { BerthApiError, BerthConnectionError, BerthTimeoutError } from './errors.js';
import { DEFAULT_RETRY_POLICY, parseRetryAfter, retryDelayMs, retryableStatus } from './retry.js';

/** A real HTTP server on loopback that answers each request with the next of `answers`, and records what came. */
interface Scripted {
  url: string;
  requests: { method: string; url: string; at: number; body: string }[];
  close(): Promise<void>;
}

type Answer = { status: number; headers?: Record<string, string>; body?: unknown } | 'hang' | 'reset';

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function scripted(answers: Answer[]): Promise<Scripted> {
  const requests: Scripted['requests'] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      requests.push({ method: req.method!, url: req.url!, at: Date.now(), body });
      const answer = answers[requests.length - 1] ?? { status: 200, body: { ok: true } };
      if (answer === 'hang') return;
      if (answer === 'reset') return req.socket.destroy();
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers }).end(JSON.stringify(answer.body ?? {}));
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, close: async () => undefined };
}

const envelope = (code: string, details: Record<string, unknown> = {}) => ({ error: { code, message: `the ${code}`, details, requestId: 'req_1' } });
const fast = { baseDelayMs: 5, maxDelayMs: 20 };

describe('retry policy', () => {
  it('waits what Retry-After says, in seconds or as a date, plus at most 10 %', () => {
    expect(parseRetryAfter('2')).toBe(2000);
    expect(parseRetryAfter('0.5')).toBe(500);
    expect(parseRetryAfter(new Date(Date.parse('2026-11-23T10:00:03Z')).toUTCString(), Date.parse('2026-11-23T10:00:00Z'))).toBe(3000);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(retryDelayMs(0, 2000, DEFAULT_RETRY_POLICY, () => 0)).toBe(2000);
    expect(retryDelayMs(0, 2000, DEFAULT_RETRY_POLICY, () => 0.999)).toBe(2200);
    // Longer than the client will wait: not retried.
    expect(retryDelayMs(0, 120_000, DEFAULT_RETRY_POLICY, () => 0.5)).toBeUndefined();
  });

  it('backs off exponentially with full jitter, capped', () => {
    const policy = { ...DEFAULT_RETRY_POLICY, baseDelayMs: 100, maxDelayMs: 1000 };
    expect([0, 1, 2, 3, 4, 5].map((attempt) => retryDelayMs(attempt, undefined, policy, () => 1))).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(retryDelayMs(3, undefined, policy, () => 0.25)).toBe(200);
    expect(retryDelayMs(3, undefined, policy, () => 0)).toBe(0);
  });

  it('retries 429 always, other transient statuses only where repeating is safe', () => {
    expect(retryableStatus(429, false)).toBe(true);
    expect(retryableStatus(503, false)).toBe(false);
    expect(retryableStatus(503, true)).toBe(true);
    expect(retryableStatus(504, true)).toBe(true);
    expect(retryableStatus(409, true)).toBe(false);
    expect(retryableStatus(422, true)).toBe(false);
  });
});

describe('the transport against a real server', () => {
  it('honours Retry-After on 429 and 503, then returns the answer', async () => {
    const server = await scripted([
      { status: 429, headers: { 'retry-after': '1' }, body: envelope('rate_limited', { retryAfter: 1 }) },
      { status: 503, headers: { 'retry-after': '0' }, body: envelope('internal_error') },
      { status: 200, body: { data: [], hasMore: false } },
    ]);
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', retry: fast });
    const page = await berth.sessions.list({ limit: 5 });
    expect(page).toEqual({ data: [], hasMore: false });
    expect(server.requests.map((request) => request.url)).toEqual(['/v1/sessions?limit=5', '/v1/sessions?limit=5', '/v1/sessions?limit=5']);
    const gap = server.requests[1]!.at - server.requests[0]!.at;
    expect(gap).toBeGreaterThanOrEqual(1000);
    expect(gap).toBeLessThan(1000 * 1.1 + 500);
  });

  it('retries a POST on 429 (refused before any route ran) but not on 503', async () => {
    const server = await scripted([
      { status: 429, headers: { 'retry-after': '0' }, body: envelope('rate_limited') },
      { status: 503, body: envelope('internal_error') },
    ]);
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', retry: fast });
    const error = await berth.agents.handle('agt_1').exec.python('print(1)').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(BerthApiError);
    expect(error).toMatchObject({ status: 503, code: 'internal_error', requestId: 'req_1', message: 'internal_error: the internal_error' });
    expect(server.requests.map((request) => [request.method, request.url, JSON.parse(request.body)])).toEqual([
      ['POST', '/v1/agents/agt_1/exec', { language: 'python', code: 'print(1)' }],
      ['POST', '/v1/agents/agt_1/exec', { language: 'python', code: 'print(1)' }],
    ]);
  });

  it('retries the POSTs the API makes idempotent (a session by user) on 5xx', async () => {
    const server = await scripted([{ status: 502, body: envelope('provider_error') }, { status: 200, body: { id: 'ses_1', userId: 'alice' } }]);
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', retry: fast });
    expect(await berth.sessions.forUser('alice')).toEqual({ id: 'ses_1', userId: 'alice' });
    expect(server.requests).toHaveLength(2);
  });

  it('gives up after maxRetries with the last error envelope', async () => {
    const server = await scripted(Array.from({ length: 5 }, () => ({ status: 503, body: envelope('internal_error', { why: 'busy' }) })));
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', retry: { ...fast, maxRetries: 2 } });
    const error = (await berth.sessions.get('ses_1').catch((caught: unknown) => caught)) as BerthApiError;
    expect(error.details).toEqual({ why: 'busy' });
    expect(server.requests).toHaveLength(3);
  });

  it('does not retry what cannot succeed (422, 404, 409)', async () => {
    const server = await scripted([{ status: 422, body: envelope('unprocessable_entity', { fields: { userId: 'required' } }) }]);
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', retry: fast });
    const error = (await berth.sessions.get('ses_1').catch((caught: unknown) => caught)) as BerthApiError;
    expect(error).toMatchObject({ status: 422, code: 'unprocessable_entity', details: { fields: { userId: 'required' } } });
    expect(server.requests).toHaveLength(1);
  });

  it('does not wait for a Retry-After longer than maxRetryAfterMs', async () => {
    const server = await scripted([{ status: 429, headers: { 'retry-after': '3600' }, body: envelope('rate_limited', { retryAfter: 3600 }) }]);
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', retry: fast });
    const error = (await berth.sessions.get('ses_1').catch((caught: unknown) => caught)) as BerthApiError;
    expect(error).toMatchObject({ code: 'rate_limited', retryAfter: 3600 });
    expect(server.requests).toHaveLength(1);
  });

  it('retries a GET whose connection was reset; a POST is not sent twice', async () => {
    const server = await scripted(['reset', { status: 200, body: { id: 'ses_1' } }, 'reset']);
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', retry: fast });
    expect(await berth.sessions.get('ses_1')).toEqual({ id: 'ses_1' });
    await expect(berth.sessions.create({ userId: 'bob' })).rejects.toBeInstanceOf(BerthConnectionError);
    expect(server.requests.map((request) => request.method)).toEqual(['GET', 'GET', 'POST']);
  });

  it('retries any request whose connection was refused (it never reached a server)', async () => {
    const server = await scripted([]);
    const port = Number(new URL(server.url).port);
    servers.pop()!.close();
    const berth = new Berth({ url: `http://127.0.0.1:${port}`, apiKey: 'svc_test_x', retry: { ...fast, maxRetries: 2 } });
    const started = Date.now();
    const error = await berth.sessions.create({ userId: 'bob' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(BerthConnectionError);
    expect((error as Error).message).toContain('ECONNREFUSED');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('abandons a try after timeoutMs, and stops at once when the caller aborts', async () => {
    const server = await scripted(['hang', 'hang', 'hang']);
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', timeoutMs: 200, retry: { ...fast, maxRetries: 1 } });
    await expect(berth.sessions.get('ses_1')).rejects.toBeInstanceOf(BerthTimeoutError);
    expect(server.requests).toHaveLength(2);
    const controller = new AbortController();
    const pending = berth.sessions.get('ses_2', { signal: controller.signal, timeoutMs: 10_000 });
    setTimeout(() => controller.abort(new Error('caller gave up')), 100);
    await expect(pending).rejects.toThrow('caller gave up');
    expect(server.requests).toHaveLength(3);
  });

  it('sends the key, and reads BERTH_URL and BERTH_API_KEY when not given', async () => {
    const server = await scripted([{ status: 200, body: { data: [] } }]);
    const saved = { url: process.env.BERTH_URL, key: process.env.BERTH_API_KEY };
    process.env.BERTH_URL = `${server.url}/`;
    process.env.BERTH_API_KEY = 'svc_test_fromenv';
    try {
      expect(await new Berth().secrets.list()).toEqual([]);
    } finally {
      for (const [name, value] of [['BERTH_URL', saved.url], ['BERTH_API_KEY', saved.key]] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    expect(server.requests[0]!.url).toBe('/v1/secrets');
    expect(() => new Berth({ url: 'http://x' })).toThrow(/BERTH_API_KEY/);
  });
});
