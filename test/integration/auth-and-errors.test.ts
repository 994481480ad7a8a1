import pgModule from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBerth, startBerth, type BerthProcess } from '../helpers/berth.js';
import { apiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

let berth: BerthProcess;
let databaseUrl: string;
let pg: pgModule.Pool;

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  berth = await startBerth({ env: { DATABASE_URL: databaseUrl } });
  pg = new pgModule.Pool({ connectionString: databaseUrl, max: 1 });
});
afterAll(async () => {
  await pg.end();
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
});

function expectEnvelope(response: { status: number; body: any; headers: Headers }, status: number, code: string) {
  expect(response.status).toBe(status);
  expect(Object.keys(response.body)).toEqual(['error']);
  expect(response.body.error).toEqual({
    code,
    message: expect.any(String),
    details: expect.any(Object),
    requestId: expect.stringMatching(/^req_[0-9a-z]{26}$/),
  });
  expect(response.headers.get('x-request-id')).toBe(response.body.error.requestId);
}

describe('API keys', () => {
  it('answers a request without a key with 401 unauthorized', async () => {
    expectEnvelope(await apiClient(berth.baseUrl).get('/v1/sessions'), 401, 'unauthorized');
  });

  it('answers a header that is not a bearer token with 401 unauthorized', async () => {
    const response = await apiClient(berth.baseUrl).raw('/v1/sessions', { headers: { authorization: `Basic ${berth.liveKey}` } });
    expectEnvelope(response, 401, 'unauthorized');
  });

  it('answers an unknown or malformed key with 401 auth/invalid_key', async () => {
    expectEnvelope(await apiClient(berth.baseUrl, `svc_live_${'x'.repeat(40)}`).get('/v1/sessions'), 401, 'auth/invalid_key');
    expectEnvelope(await apiClient(berth.baseUrl, 'not-a-key').get('/v1/sessions'), 401, 'auth/invalid_key');
  });

  it('authenticates before validating: a bad body without a key is 401', async () => {
    expectEnvelope(await apiClient(berth.baseUrl).post('/v1/sessions', { nonsense: true }), 401, 'unauthorized');
  });

  it('creates, lists and revokes keys from the shell; a revoked key gets 401 auth/key_revoked at once', async () => {
    const env = { DATABASE_URL: databaseUrl, BERTH_LOG_LEVEL: 'warn' };
    const created = await runBerth(['keys', 'create', '--mode', 'test', '--label', 'ci'], env);
    expect(created.code).toBe(0);
    const key = /key: (svc_test_[0-9A-Za-z]{40})/.exec(created.stdout)![1]!;
    const keyId = /created (key_[0-9a-z]+)/.exec(created.stdout)![1]!;
    const client = apiClient(berth.baseUrl, key);
    expect((await client.get('/v1/sessions')).status).toBe(200);

    const listed = await runBerth(['keys', 'list'], env);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(keyId);
    expect(listed.stdout).toContain(key.slice(0, 15));
    expect(listed.stdout).not.toContain(key);
    // Its use is recorded, once a minute at most, beside the request.
    const lastUsed = async () =>
      (await pg.query<{ last_used_at: Date | null }>('SELECT last_used_at FROM api_keys WHERE id = $1', [keyId])).rows[0]!.last_used_at;
    await expect.poll(lastUsed).not.toBeNull();
    const first = await lastUsed();
    expect((await client.get('/v1/sessions')).status).toBe(200);
    expect(await lastUsed()).toEqual(first);

    const revoked = await runBerth(['keys', 'revoke', keyId], env);
    expect(revoked.code).toBe(0);
    const response = await client.get('/v1/sessions');
    expectEnvelope(response, 401, 'auth/key_revoked');
    expect(response.body.error.details.revokedAt).toEqual(expect.any(String));
    expect((await runBerth(['keys', 'list'], env)).stdout).toMatch(new RegExp(`${keyId}.*revoked`));

    const unknown = await runBerth(['keys', 'revoke', 'key_nope'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no key');
  });
});

describe('errors', () => {
  const live = () => berth.api(berth.liveKey);

  it('answers an unknown route with 404 not_found, and a method the route does not take with 405, in the envelope', async () => {
    expectEnvelope(await live().get('/v1/nothing-here'), 404, 'not_found');
    const wrongMethod = await live().raw('/v1/sessions', { method: 'DELETE' });
    expectEnvelope(wrongMethod, 405, 'method_not_allowed');
    expect(wrongMethod.headers.get('allow')).toBe('POST, GET, HEAD');
  });

  it('answers malformed JSON with 422', async () => {
    const response = await live().raw('/v1/sessions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"userId": ' });
    expectEnvelope(response, 422, 'unprocessable_entity');
    expect(response.body.error.details.fields.body).toBeDefined();
  });

  it('answers a body that is not JSON with 415 saying so', async () => {
    const response = await live().raw('/v1/sessions', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'userId=me' });
    expectEnvelope(response, 415, 'unsupported_media_type');
    expect(response.body.error.message).toContain('application/json');
  });

  it('answers a JSON body that is not an object with 422', async () => {
    expectEnvelope(await live().raw('/v1/sessions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[1,2]' }), 422, 'unprocessable_entity');
  });

  it('answers a body over 2 MiB with 413 payload_too_large', async () => {
    const response = await live().post('/v1/sessions', { userId: 'x'.repeat(3 * 1024 * 1024) });
    expectEnvelope(response, 413, 'payload_too_large');
  });

  it('gives every response a request id', async () => {
    const response = await live().get('/v1/sessions');
    expect(response.headers.get('x-request-id')).toMatch(/^req_/);
  });
});

describe('public routes', () => {
  it('serves health, readiness and the OpenAPI document without a key', async () => {
    const client = apiClient(berth.baseUrl);
    expect((await client.get('/healthz')).body).toEqual({ ok: true });
    expect((await client.get('/readyz')).body).toEqual({ ok: true, database: true, controllers: true });
    const openapi = (await client.get('/v1/openapi.json')).body;
    expect(openapi.openapi).toBe('3.1.0');
    expect(Object.keys(openapi.paths)).toEqual(
      expect.arrayContaining([
        '/v1/sessions',
        '/v1/sessions/by-user/{userId}',
        '/v1/sessions/{id}',
        '/v1/sessions/{id}/agents',
        '/v1/agents/{id}',
        '/v1/agents/{id}/exec',
        '/v1/agents/{id}/terminate',
      ]),
    );
    const exec = openapi.paths['/v1/agents/{id}/exec'].post;
    expect(exec.requestBody.content['application/json'].schema.properties.language.enum).toEqual(['python', 'typescript', 'bash']);
    expect(exec.responses['504'].description).toContain('timeout');
    expect(exec.responses['401'].description).toContain('auth/key_revoked');
  });
});
