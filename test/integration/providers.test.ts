import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, SecretBox, createOrganization } from '../../common/src/index.js';
import { MockProvider } from '../../providers/src/mock.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { recordingClient, type ApiClient } from '../helpers/http.js';

/**
 * The BYOI provider routes in process, on a real database: configurations name an organization
 * secret and are checked by provider; every response is kept and searched for the secret's value.
 */
const TOKEN = `tok-${randomBytes(18).toString('hex')}`;
const responses: string[] = [];

let api: TestApi;
let live: ApiClient;
let test: ApiClient;
const clock = new ManualClock('2026-05-01T09:00:00Z');

const put = (client: ApiClient, provider: string, body: unknown) =>
  client.raw(`/v1/providers/${provider}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const remove = (client: ApiClient, provider: string) => client.raw(`/v1/providers/${provider}`, { method: 'DELETE' });

beforeAll(async () => {
  api = await startTestApi({
    clock,
    providers: new ProviderRegistry([new MockProvider({ computes: ['python'], browser: false, gpuTypes: [], storage: false, checkpoint: 'none' })], 'mock'),
    app: { secretBox: new SecretBox(randomBytes(32)) },
  });
  const organization = await createOrganization(api.pool, 'providers');
  live = recordingClient((await api.client(organization.id, 'live')).api, responses);
  test = recordingClient((await api.client(organization.id, 'test')).api, responses);
  expect((await live.post('/v1/secrets', { REMOTE_TOKEN: TOKEN, OPENAI_KEY: `sk-${TOKEN}` })).status).toBe(200);
});
afterAll(async () => {
  await api.close();
});

describe('PUT /v1/providers/:provider', () => {
  it('refuses a credentialRef that names no organization secret, naming the field', async () => {
    const response = await put(live, 'remote', { credentialRef: 'NOT_STORED', config: { endpoint: 'https://compute.example.com' } });
    expect(response.status).toBe(422);
    expect(response.body.error.code).toBe('unprocessable_entity');
    expect(response.body.error.details.fields.credentialRef[0]).toContain('NOT_STORED');
    expect((await live.get('/v1/providers')).body).toEqual({ data: [] });
  });

  it('refuses a session secret as the credential: it must belong to the organization', async () => {
    const session = (await live.post('/v1/sessions', { userId: 'alice' })).body;
    expect((await live.post(`/v1/sessions/${session.id}/secrets`, { SESSION_ONLY: 'x' })).status).toBe(200);
    const response = await put(live, 'custom', { credentialRef: 'SESSION_ONLY', config: { endpoint: 'https://compute.example.com' } });
    expect(response.status).toBe(422);
    expect(response.body.error.details.fields.credentialRef).toBeDefined();
  });

  it('stores a configuration and lists it: enabled by default, config null when omitted', async () => {
    const response = await put(live, 'openai', { credentialRef: 'OPENAI_KEY' });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ ok: true, provider: 'openai', mode: 'byoi' });
    expect((await live.get('/v1/providers')).body).toEqual({
      data: [{ provider: 'openai', enabled: true, credentialRef: 'OPENAI_KEY', config: null, createdAt: '2026-05-01T09:00:00.000Z' }],
    });
  });

  it('overwrites a configuration on a second PUT, keeping its creation time', async () => {
    clock.advance(60_000);
    const response = await put(live, 'openai', { credentialRef: 'REMOTE_TOKEN', config: { baseUrl: 'https://llm.example.com/v1' }, enabled: false });
    expect(response.body).toEqual({ ok: true, provider: 'openai', mode: 'byoi' });
    expect((await live.get('/v1/providers')).body.data).toEqual([
      { provider: 'openai', enabled: false, credentialRef: 'REMOTE_TOKEN', config: { baseUrl: 'https://llm.example.com/v1' }, createdAt: '2026-05-01T09:00:00.000Z' },
    ]);
  });

  it('refuses http and private, loopback and link-local endpoints unless the install allows them', async () => {
    for (const [provider, config, field] of [
      ['remote', { endpoint: 'http://compute.example.com/berth' }, 'config.endpoint'],
      ['remote', { endpoint: 'https://127.0.0.1:9090/provider/v1' }, 'config.endpoint'],
      ['remote', { endpoint: 'https://169.254.169.254/latest' }, 'config.endpoint'],
      ['my-cloud', { endpoint: 'https://10.0.0.8/provider/v1' }, 'config.endpoint'],
      ['openai', { baseUrl: 'https://localhost:8000/v1' }, 'config.baseUrl'],
      ['openai', { baseUrl: 'https://[fd00::1]/v1' }, 'config.baseUrl'],
    ] as const) {
      const response = await put(live, provider, { credentialRef: 'REMOTE_TOKEN', config });
      expect(response.status, JSON.stringify(config)).toBe(422);
      expect(response.body.error.details.fields[field].join(' '), JSON.stringify(config)).toMatch(/https URL|private, loopback or link-local/);
    }
  });

  it('requires config.endpoint, an http(s) URL, for remote, for a name of its own and for this install\'s own provider', async () => {
    for (const provider of ['remote', 'my-cloud-4', 'mock']) {
      for (const config of [undefined, null, {}, { baseUrl: 'https://llm.example.com/v1' }, { endpoint: 'ftp://compute.example.com' }, { endpoint: 'not a url' }, { endpoint: 'https://user:pw@compute.example.com' }]) {
        const response = await put(live, provider, { credentialRef: 'REMOTE_TOKEN', ...(config === undefined ? {} : { config }) });
        const what = `${provider} ${JSON.stringify(config)}`;
        expect(response.status, what).toBe(422);
        const [field, messages] = Object.entries(response.body.error.details.fields)[0] as [string, string[]];
        expect(field, what).toMatch(/^config/);
        if (config == null || !('endpoint' in config)) expect(messages.join(' '), what).toContain('remote provider protocol');
      }
    }
    // Nothing was stored for the refused ones: agents on this install's provider still start here.
    expect((await live.get('/v1/providers')).body.data.map((entry: any) => entry.provider)).not.toContain('mock');
    const ok = await put(live, 'remote', { credentialRef: 'REMOTE_TOKEN', config: { endpoint: 'https://compute.example.com/berth', region: 'eu' } });
    expect(ok.body).toEqual({ ok: true, provider: 'remote', mode: 'byoi' });
    const listed = (await live.get('/v1/providers')).body.data.find((entry: any) => entry.provider === 'remote');
    expect(listed).toMatchObject({ enabled: true, credentialRef: 'REMOTE_TOKEN', config: { endpoint: 'https://compute.example.com/berth', region: 'eu' } });
  });

  it('checks a model vendor\'s baseUrl and kubernetes\' namespace; takes other keys beside an endpoint', async () => {
    const badBase = await put(live, 'anthropic', { credentialRef: 'OPENAI_KEY', config: { baseUrl: 'file:///etc/passwd' } });
    expect(badBase.status).toBe(422);
    expect(badBase.body.error.details.fields['config.baseUrl']).toBeDefined();
    const misspelt = await put(live, 'anthropic', { credentialRef: 'OPENAI_KEY', config: { baseURL: 'https://llm.example.com' } });
    expect(misspelt.status).toBe(422);
    expect(misspelt.body.error.details.fields.config[0]).toContain('baseURL');
    const badNamespace = await put(live, 'kubernetes', { credentialRef: 'REMOTE_TOKEN', config: { namespace: 'Not_A_Label' } });
    expect(badNamespace.status).toBe(422);
    expect(badNamespace.body.error.details.fields['config.namespace']).toBeDefined();
    expect((await put(live, 'kubernetes', { credentialRef: 'REMOTE_TOKEN', config: { namespace: 'team-a' } })).status).toBe(200);
    expect((await put(live, 'my-cloud-2', { credentialRef: 'REMOTE_TOKEN', config: { endpoint: 'https://compute.example.com', anything: [1, 2], nested: { ok: true } } })).status).toBe(200);
    const badEndpoint = await put(live, 'my-cloud-3', { credentialRef: 'REMOTE_TOKEN', config: { endpoint: 'gopher://x' } });
    expect(badEndpoint.body.error.details.fields['config.endpoint']).toBeDefined();
  });

  it.each([['Upper'], ['under_score'], ['a'.repeat(65)], ['dot.ted']])('refuses the provider name %s with 422', async (name) => {
    const response = await put(live, name, { credentialRef: 'REMOTE_TOKEN' });
    expect(response.status).toBe(422);
    expect(response.body.error.details.fields.provider).toBeDefined();
  });

  it('refuses unknown fields, a missing credentialRef and a non-boolean enabled', async () => {
    for (const body of [{ credentialRef: 'REMOTE_TOKEN', token: TOKEN }, {}, { credentialRef: 'REMOTE_TOKEN', enabled: 'yes' }, { credentialRef: 'REMOTE_TOKEN', config: [1] }]) {
      expect((await put(live, 'custom', body)).status, JSON.stringify(body)).toBe(422);
    }
  });
});

describe('DELETE /v1/providers/:provider', () => {
  it('returns the provider to managed mode, then answers 404', async () => {
    const first = await remove(live, 'my-cloud-2');
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ ok: true, provider: 'my-cloud-2', mode: 'managed' });
    expect((await live.get('/v1/providers')).body.data.map((entry: any) => entry.provider)).toEqual(['kubernetes', 'openai', 'remote']);
    const again = await remove(live, 'my-cloud-2');
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('not_found');
    expect((await remove(live, 'Bad_Name')).status).toBe(422);
  });

  it('keeps the credential secret', async () => {
    expect((await live.get('/v1/secrets')).body.data.map((secret: any) => secret.name)).toEqual(['OPENAI_KEY', 'REMOTE_TOKEN']);
  });
});

describe('key modes', () => {
  it("keeps a test key apart from the live key's configurations and secrets", async () => {
    expect((await test.get('/v1/providers')).body).toEqual({ data: [] });
    expect((await remove(test, 'remote')).status).toBe(404);
    // The live key's secret is not the test key's to name.
    expect((await put(test, 'remote', { credentialRef: 'REMOTE_TOKEN', config: { endpoint: 'https://compute.example.com' } })).status).toBe(422);
    expect((await test.post('/v1/secrets', { TEST_TOKEN: 'test-token' })).status).toBe(200);
    expect((await put(test, 'remote', { credentialRef: 'TEST_TOKEN', config: { endpoint: 'https://sandbox.example.com' } })).status).toBe(200);
    expect((await test.get('/v1/providers')).body.data).toEqual([expect.objectContaining({ provider: 'remote', credentialRef: 'TEST_TOKEN' })]);
    const liveRemote = (await live.get('/v1/providers')).body.data.find((entry: any) => entry.provider === 'remote');
    expect(liveRemote.credentialRef).toBe('REMOTE_TOKEN');
  });
});

describe('the API description', () => {
  it('documents the three routes', async () => {
    const document = (await live.get('/v1/openapi.json')).body;
    expect(Object.keys(document.paths['/v1/providers/{provider}'])).toEqual(['put', 'delete']);
    expect(document.paths['/v1/providers/{provider}'].put.description).toContain('kubeconfig');
  });
});

describe('secret values', () => {
  it('never appear in a response', () => {
    expect(responses.length).toBeGreaterThan(20);
    for (const body of responses) expect(body).not.toContain(TOKEN);
  });
});
