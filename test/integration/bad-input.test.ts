import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import type { ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Input that generated and hand-made requests sent to a real `berth up`: each gets the error
 * envelope with the right status and code, never a 500, and nothing is half-written.
 */
let berth: BerthProcess;
let test: ApiClient;
let live: ApiClient;

beforeAll(async () => {
  berth = await startBerth({ env: { DATABASE_URL: await createTestDatabase() } });
  test = berth.api(berth.testKey);
  live = berth.api(berth.liveKey);
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
});

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

/** A request exactly as written: no client normalizes its path, headers or body. */
function raw(options: { method?: string; path: string; headers?: Record<string, string>; body?: Buffer | string }): Promise<RawResponse> {
  const url = new URL(berth.baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, method: options.method ?? 'GET', path: options.path, headers: options.headers ?? {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode!, headers: res.headers, body: text ? JSON.parse(text) : undefined });
        });
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

function expectEnvelope(response: { status: number; body: any }, status: number, code: string): any {
  expect({ status: response.status, code: response.body?.error?.code }).toEqual({ status, code });
  expect(response.body).toEqual({
    error: { code, message: expect.any(String), details: expect.any(Object), requestId: expect.stringMatching(/^req_/) },
  });
  return response.body.error;
}

function expectField(response: { status: number; body: any }, field: string, status = 422, code = 'unprocessable_entity'): void {
  const error = expectEnvelope(response, status, code);
  expect(Object.keys(error.details.fields ?? {})).toContain(field);
}

const auth = () => ({ authorization: `Bearer ${berth.testKey}` });

async function sessionCount(): Promise<number> {
  const listed = await test.get('/v1/sessions?limit=100');
  return listed.body.data.length;
}

describe('text PostgreSQL cannot hold (NUL, lone surrogates)', () => {
  it('is refused in bodies with 422 naming the field, and nothing is written', async () => {
    const before = await sessionCount();
    expectField(await test.post('/v1/sessions', { userId: 'a\u0000b' }), 'userId');
    expectField(await test.post('/v1/sessions', { userId: 'a\ud800b' }), 'userId');
    expectField(await test.post('/v1/sessions', { userId: 'a', metadata: { k: 'v\udc00' } }), 'metadata.k');
    expectField(await test.post('/v1/sessions', { userId: 'a', metadata: { 'k\u0000': 'v' } }), 'metadata.k\u0000');
    expect(await sessionCount()).toBe(before);
  });

  it('is refused in path segments and query strings', async () => {
    expectField(await raw({ method: 'POST', path: '/v1/sessions/by-user/a%00b', headers: { ...auth(), 'content-type': 'application/json' }, body: '{}' }), 'userId');
    expectField(await raw({ path: '/v1/usage/users/a%00b', headers: auth() }), 'userId');
    expectField(await raw({ path: '/v1/sessions?cursor=a%00b', headers: auth() }), 'cursor');
  });

  it('is refused in the free-form agent fields and in secret values', async () => {
    const session = (await test.post('/v1/sessions', { userId: 'nul-agent' })).body;
    expectField(await test.post(`/v1/sessions/${session.id}/agents`, { instructions: 'be \u0000 nice' }), 'instructions');
    expectField(await test.post(`/v1/sessions/${session.id}/agents`, { metadata: { rule: { nested: 'x\ud83d' } } }), 'metadata.rule.nested');
    expect((await test.get(`/v1/sessions/${session.id}/agents`)).body.data).toEqual([]);

    expectField(await test.post('/v1/secrets', { TOKEN: 'abc\u0000def' }), 'TOKEN');
    expect((await test.get('/v1/secrets')).body.data.map((secret: { name: string }) => secret.name)).not.toContain('TOKEN');
  });
});

describe('paths and bodies the server cannot read', () => {
  it('answers malformed percent-encoding with 400', async () => {
    expectEnvelope(await raw({ path: '/v1/sessions/%', headers: auth() }), 400, 'bad_request');
    expectEnvelope(await raw({ method: 'POST', path: '/v1/sessions/by-user/a%zzb', headers: { ...auth(), 'content-type': 'application/json' }, body: '{}' }), 400, 'bad_request');
  });

  it('answers a charset other than UTF-8 and an unknown content-encoding with 415', async () => {
    const body = JSON.stringify({ userId: 'charset' });
    expectEnvelope(await raw({ method: 'POST', path: '/v1/sessions', headers: { ...auth(), 'content-type': 'application/json; charset=latin1' }, body }), 415, 'unsupported_media_type');
    expectEnvelope(await raw({ method: 'POST', path: '/v1/sessions', headers: { ...auth(), 'content-type': 'application/json', 'content-encoding': 'foo' }, body }), 415, 'unsupported_media_type');
  });

  it('answers a gzip body that is not gzip with 400, and reads one that is', async () => {
    const body = JSON.stringify({ userId: 'gzip' });
    const headers = { ...auth(), 'content-type': 'application/json', 'content-encoding': 'gzip' };
    expectEnvelope(await raw({ method: 'POST', path: '/v1/sessions', headers, body }), 400, 'bad_request');
    const created = await raw({ method: 'POST', path: '/v1/sessions', headers, body: gzipSync(body) });
    expect(created.status).toBe(201);
    expect(created.body.userId).toBe('gzip');
  });

  it('answers headers over 16 KiB with a 431 envelope', async () => {
    const response = await raw({ path: '/v1/sessions', headers: { ...auth(), 'x-padding': 'x'.repeat(17 * 1024) } });
    expectEnvelope(response, 431, 'headers_too_large');
    expect(response.headers['content-type']).toMatch(/^application\/json/);
  });
});

describe('nesting and size of free-form objects', () => {
  const nested = (levels: number): unknown => {
    let value: unknown = 'leaf';
    for (let level = 0; level < levels; level++) value = { a: value };
    return value;
  };

  it.each(['metadata', 'approvals', 'guardrails', 'overrides'])('refuses %s 5,000 levels deep with 422', async (field) => {
    const session = (await test.post('/v1/sessions', { userId: `deep-${field}` })).body;
    // Written by hand: JSON.stringify itself would overflow this worker's stack.
    const body = `{"${field}":${'{"a":'.repeat(5_000)}"leaf"${'}'.repeat(5_000)}}`;
    const response = await raw({ method: 'POST', path: `/v1/sessions/${session.id}/agents`, headers: { ...auth(), 'content-type': 'application/json' }, body });
    expectEnvelope(response, 422, 'unprocessable_entity');
    expect(Object.keys(response.body.error.details.fields)[0]).toMatch(new RegExp(`^${field}(\\.a)*$`));
  });

  it('bounds free-form objects well below the body limit: 9 levels or 17 KiB are refused', async () => {
    const session = (await test.post('/v1/sessions', { userId: 'free-form' })).body;
    expectField(await test.post(`/v1/sessions/${session.id}/agents`, { metadata: nested(9) }), 'metadata');
    expectField(await test.post(`/v1/sessions/${session.id}/agents`, { metadata: { big: 'x'.repeat(17 * 1024) } }), 'metadata');
    const kept = await test.post(`/v1/sessions/${session.id}/agents`, { metadata: { team: 'data', rules: nested(6) } });
    expect(kept.status).toBe(201);
    expect(kept.body.metadata.team).toBe('data');
  });
});

describe('methods', () => {
  it('answers a method a path does not take with 405 and Allow', async () => {
    const response = await raw({ method: 'DELETE', path: '/v1/sessions', headers: auth() });
    expectEnvelope(response, 405, 'method_not_allowed');
    expect(response.headers.allow).toBe('POST, GET, HEAD');
  });

  it('answers OPTIONS with the same envelope, not a bare 200', async () => {
    const response = await raw({ method: 'OPTIONS', path: '/v1/agents/agt_x/exec' });
    expectEnvelope(response, 405, 'method_not_allowed');
    expect(response.headers.allow).toBe('POST');
  });

  it('takes a POST without any body as an empty one: no lookup of a field of nothing', async () => {
    const missing = await raw({ method: 'POST', path: '/v1/sessions/ses_01jq3v9k2m8x7c4d5e6f7g8h9j/agents', headers: auth() });
    expect(expectEnvelope(missing, 404, 'not_found').details).toEqual({ id: 'ses_01jq3v9k2m8x7c4d5e6f7g8h9j' });
    const session = (await test.post('/v1/sessions/by-user/no-body', {})).body.id;
    const created = await raw({ method: 'POST', path: `/v1/sessions/${session}/agents`, headers: auth() });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ id: expect.stringMatching(/^agt_/), compute: 'python' });
  });

  it('still answers an unknown path with 404', async () => {
    expectEnvelope(await raw({ path: '/v1/nothing-here', headers: auth() }), 404, 'not_found');
  });
});

describe('validation gaps', () => {
  it("refuses money in a currency other than the install's", async () => {
    expectField(await test.post('/v1/sessions', { userId: 'eur', limits: { maxCost: { amount: 100, currency: 'eur', period: 'day' } } }), 'limits.maxCost.currency');
    const session = (await test.post('/v1/sessions', { userId: 'usd' })).body;
    expectField(await test.patch(`/v1/sessions/${session.id}`, { limits: { maxCost: { amount: 100, currency: 'eur', period: 'day' } } }), 'limits.maxCost.currency');
    expectField(await test.post(`/v1/sessions/${session.id}/agents`, { costCap: { amount: 100, currency: 'eur' } }), 'costCap.currency');
    expect((await test.get(`/v1/sessions/${session.id}`)).body.limits).toEqual({});
  });

  it('refuses absurd durations', async () => {
    const session = (await test.post('/v1/sessions', { userId: 'durations' })).body;
    expectField(await test.post(`/v1/sessions/${session.id}/agents`, { timeout: '99999999999999999999h' }), 'timeout');
    expectField(await test.post('/v1/sessions', { userId: 'durations', limits: { maxDuration: '9000h' } }), 'limits.maxDuration');
    expect((await test.post('/v1/sessions', { userId: 'durations', limits: { maxDuration: '720h' } })).status).toBe(201);
  });

  it('refuses forged cursors and numbers that are not plain decimals', async () => {
    for (let user = 0; user < 3; user++) await test.post('/v1/sessions', { userId: `page-${user}` });
    const first = await test.get('/v1/sessions?limit=2');
    expect(first.body.hasMore).toBe(true);
    const second = await test.get(`/v1/sessions?limit=2&cursor=${first.body.cursor}`);
    expect(second.status).toBe(200);
    expect(second.body.data[0].id).not.toBe(first.body.data[0].id);

    const forged = Buffer.from(JSON.stringify({ after: 'ses-zzzzzzzzzzzzzzzzzzzzzzzzzz' })).toString('base64url');
    expectField(await test.get(`/v1/sessions?cursor=${forged}`), 'cursor');
    // A live key's cursor does not page through the test key's list.
    const liveFirst = await live.get('/v1/sessions?limit=1');
    if (liveFirst.body.cursor) expectField(await test.get(`/v1/sessions?cursor=${liveFirst.body.cursor}`), 'cursor');
    expectField(await test.get('/v1/sessions?limit=0x10'), 'limit');
    expectField(await test.get('/v1/sessions?limit=1e1'), 'limit');
  });
});

describe('approval policies and guardrails that are not valid', () => {
  it.each([
    ['approvals', { tools: ['exec'] }, 'approvals'],
    ['approvals', { rules: [] }, 'approvals.rules'],
    ['approvals', { rules: [{ tool: 'exec', when: { code: '(unclosed' } }] }, 'approvals.rules.0.when.code'],
    ['approvals', { rules: [{ tool: 'exec' }], ttl: '200h' }, 'approvals.ttl'],
    ['guardrails', { pii: 'block' }, 'guardrails.pii'],
    ['guardrails', { promptInjection: { action: 'redact' } }, 'guardrails.promptInjection.action'],
    ['guardrails', { denyList: { action: 'block', terms: [] } }, 'guardrails.denyList.terms'],
  ])('answers %s %j with 422 naming %s, and creates no agent', async (field, value, named) => {
    const session = (await test.post('/v1/sessions', { userId: `invalid-${field}` })).body;
    expectField(await test.post(`/v1/sessions/${session.id}/agents`, { [field]: value }), named);
    expect((await test.get(`/v1/sessions/${session.id}/agents`)).body.data).toEqual([]);
  });

  it('names the field inside the overrides of a definition', async () => {
    const definition = await test.post('/v1/agent-definitions', { name: 'invalid-policy-overrides' });
    expect(definition.status).toBe(201);
    const session = (await test.post('/v1/sessions', { userId: 'invalid-policy-overrides' })).body;
    const response = await test.post(`/v1/sessions/${session.id}/agents`, {
      definition: 'invalid-policy-overrides',
      overrides: { approvals: { rules: [{ tool: 'exec', when: { code: '[' } }] } },
    });
    expectField(response, 'overrides.approvals.rules.0.when.code');
  });
});

describe('lifecycle policy values', () => {
  it.each([
    ['lifecycle.onTimeout', { onTimeout: 'hibernate' }],
    ['lifecycle.idle.terminateAfter', { idle: { terminateAfter: 'later' } }],
    ['lifecycle.idle.terminateAfter', { idle: { pauseAfter: '10m', terminateAfter: '5m' } }],
  ])('answers a bad %s with 422 naming it, and creates no agent', async (field, value) => {
    const session = (await test.post('/v1/sessions', { userId: `policy-${field}-${JSON.stringify(value).length}` })).body;
    expectField(await test.post(`/v1/sessions/${session.id}/agents`, { lifecycle: value }), field, 422, 'unprocessable_entity');
    expect((await test.get(`/v1/sessions/${session.id}/agents`)).body.data).toEqual([]);
  });

  it('answers the same inside the overrides of a definition', async () => {
    const definition = await test.post('/v1/agent-definitions', { name: 'policy-overrides' });
    expect(definition.status).toBe(201);
    const session = (await test.post('/v1/sessions', { userId: 'policy-overrides' })).body;
    const response = await test.post(`/v1/sessions/${session.id}/agents`, { definition: 'policy-overrides', overrides: { lifecycle: { onTimeout: 'hibernate' } } });
    expectField(response, 'overrides.lifecycle.onTimeout', 422, 'unprocessable_entity');
  });
});
