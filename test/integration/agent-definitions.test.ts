import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, createOrganization } from '../../common/src/index.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { IdleProvider } from '../helpers/fake-providers.js';
import type { ApiClient, ApiResponse } from '../helpers/http.js';

/**
 * Agent definitions through the API, in-process against a real PostgreSQL database, with time
 * on a manual clock. Agents are created but never reconciled: what matters here is the agent
 * resource written from a definition, so the provider only has to exist.
 */
let api: TestApi;
let live: ApiClient;
let liveKeyId: string;
let testMode: ApiClient;
let otherOrganization: ApiClient;
let sessionId: string;
const clock = new ManualClock('2026-05-01T09:00:00Z');

beforeAll(async () => {
  api = await startTestApi({ clock, providers: new ProviderRegistry([new IdleProvider()], 'idle') });
  const organization = await createOrganization(api.pool, 'definitions');
  const liveKey = await api.client(organization.id, 'live');
  live = liveKey.api;
  liveKeyId = liveKey.keyId;
  testMode = (await api.client(organization.id, 'test')).api;
  otherOrganization = (await api.client((await createOrganization(api.pool, 'other')).id, 'live')).api;
  sessionId = (await live.post('/v1/sessions', { userId: 'definitions' })).body.id;
});
afterAll(async () => {
  await api.close();
});

const put = (client: ApiClient, path: string, body: unknown) =>
  client.raw(path, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const remove = (client: ApiClient, path: string) => client.raw(path, { method: 'DELETE' });

function expectError(response: ApiResponse, status: number, code: string, fields: string[] = []) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error).toMatchObject({ code, message: expect.any(String), requestId: expect.stringMatching(/^req_/) });
  if (fields.length > 0) expect(Object.keys(response.body.error.details.fields ?? {}).sort()).toEqual([...fields].sort());
}

let names = 0;
/** A definition with a unique name, created a second after the previous one so that lists have an order. */
async function createDefinition(body: Record<string, unknown> = {}) {
  clock.advance(1_000);
  const response = await live.post('/v1/agent-definitions', { name: `definition ${++names}`, ...body });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body;
}

async function createAgent(body: Record<string, unknown>) {
  const response = await live.post(`/v1/sessions/${sessionId}/agents`, body);
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body;
}

describe('POST /v1/agent-definitions', () => {
  it('creates a definition at version 1 with the defaults of the spec', async () => {
    const response = await live.post('/v1/agent-definitions', { name: 'support bot' });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({
      id: expect.stringMatching(/^adef_[0-9a-z]{26}$/),
      name: 'support bot',
      version: 1,
      compute: 'python',
      tools: [],
      browser: false,
      timeout: '15m',
      config: {},
      archived: false,
      createdAt: clock.now().toISOString(),
      updatedAt: clock.now().toISOString(),
    });
    expect((await live.get(`/v1/agent-definitions/${response.body.id}`)).body).toEqual(response.body);
  });

  it('keeps every field given and caps the timeout at 24h', async () => {
    const fields = {
      description: 'answers billing questions',
      compute: 'node',
      model: 'anthropic/claude-sonnet-4-5',
      systemPrompt: 'You answer billing questions.',
      tools: ['exec', 'read_file'],
      browser: false,
      config: { temperature: 0.3, maxTokens: 800, topP: 0.9 },
    };
    const definition = await createDefinition({ ...fields, timeout: '48h' });
    expect(definition).toMatchObject({ ...fields, timeout: '24h', version: 1 });
    // Its model settings are the runs' settings of agents made from it; overrides replace them whole.
    expect((await createAgent({ definition: definition.id })).modelSettings).toEqual({ temperature: 0.3, maxTokens: 800, topP: 0.9 });
    expect((await createAgent({ definition: definition.id, overrides: { modelSettings: { temperature: 1 } } })).modelSettings).toEqual({ temperature: 1 });
  });

  it('refuses invalid fields with 422 naming each', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{}, 'name'],
      [{ name: '' }, 'name'],
      [{ name: ' leading space' }, 'name'],
      [{ name: 'a/b' }, 'name'],
      [{ name: 'x'.repeat(101) }, 'name'],
      [{ name: 'adef_lookalike' }, 'name'],
      [{ name: 'ok', compute: 'rust' }, 'compute'],
      [{ name: 'ok', model: 'gpt-4o' }, 'model'],
      [{ name: 'ok', model: 'acme/large' }, 'model'],
      [{ name: 'ok', tools: ['teleport'] }, 'tools'],
      [{ name: 'ok', tools: ['browser_navigate'] }, 'tools'],
      [{ name: 'ok', timeout: '5 minutes' }, 'timeout'],
      [{ name: 'ok', browser: 'yes' }, 'browser'],
      [{ name: 'ok', config: { temperature: 2.5 } }, 'config.temperature'],
      [{ name: 'ok', config: { maxTokens: 1.5 } }, 'config.maxTokens'],
      [{ name: 'ok', config: { maxTokens: 0 } }, 'config.maxTokens'],
      [{ name: 'ok', config: { topP: -0.1 } }, 'config.topP'],
      [{ name: 'ok', config: { seed: 7 } }, 'config'],
      [{ name: 'ok', instructions: 'use systemPrompt' }, 'body'],
    ];
    for (const [body, field] of cases) {
      const response = await live.post('/v1/agent-definitions', body);
      expectError(response, 422, 'unprocessable_entity', [field]);
    }
    expect((await live.get('/v1/agent-definitions')).body.data.map((definition: { name: string }) => definition.name)).not.toContain('ok');
  });

  it('accepts names of letters, digits, spaces, - _ and . and refuses one in use with 409', async () => {
    const definition = await createDefinition({ name: 'Tier-2 support_v1.0' });
    expect(definition.name).toBe('Tier-2 support_v1.0');
    expectError(await live.post('/v1/agent-definitions', { name: 'Tier-2 support_v1.0' }), 409, 'conflict', ['name']);
  });
});

describe('GET /v1/agent-definitions', () => {
  it('lists newest first in { data }, archived ones only with includeArchived=true', async () => {
    const older = await createDefinition();
    const newer = await createDefinition();
    const archived = await createDefinition();
    await remove(live, `/v1/agent-definitions/${archived.id}`);

    const listed = (await live.get('/v1/agent-definitions')).body.data;
    const ids = listed.map((definition: { id: string }) => definition.id);
    expect(ids.indexOf(newer.id)).toBeLessThan(ids.indexOf(older.id));
    expect(ids).not.toContain(archived.id);
    expect(listed.find((definition: { id: string }) => definition.id === newer.id)).toEqual(newer);
    expect((await live.get('/v1/agent-definitions?includeArchived=false')).body.data).toEqual(listed);

    const all = (await live.get('/v1/agent-definitions?includeArchived=true')).body.data;
    expect(all.map((definition: { id: string }) => definition.id).slice(0, 3)).toEqual([archived.id, newer.id, older.id]);
    expect(all[0]).toMatchObject({ id: archived.id, archived: true });
    expectError(await live.get('/v1/agent-definitions?includeArchived=yes'), 422, 'unprocessable_entity', ['includeArchived']);
  });
});

describe('versions: update, history and rollback', () => {
  it('updates into a new version while agents created before keep theirs', async () => {
    const definition = await createDefinition({ systemPrompt: 'first', tools: ['exec'] });
    const agent = await createAgent({ definition: definition.id });
    expect(agent).toMatchObject({ definition: definition.id, definitionVersion: 1, instructions: 'first', tools: ['exec'] });

    clock.advance(60_000);
    const updated = await put(live, `/v1/agent-definitions/${definition.id}`, { systemPrompt: 'second', changelog: 'friendlier prompt' });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({
      ...definition,
      version: 2,
      systemPrompt: 'second',
      updatedAt: clock.now().toISOString(),
    });
    expect((await live.get(`/v1/agent-definitions/${definition.id}`)).body).toEqual(updated.body);
    expect((await live.get(`/v1/agents/${agent.id}`)).body).toMatchObject({ definitionVersion: 1, instructions: 'first' });
    expect(await createAgent({ definition: definition.id })).toMatchObject({ definitionVersion: 2, instructions: 'second' });
  });

  it('lists versions newest first with their changelog and the key that wrote them', async () => {
    const definition = await createDefinition({ tools: ['exec'] });
    clock.advance(1_000);
    await put(live, `/v1/agent-definitions/${definition.id}`, { tools: ['exec', 'list_files'], timeout: '1h' });
    const updatedAt = clock.now().toISOString();
    const versions = await live.get(`/v1/agent-definitions/${definition.id}/versions`);
    expect(versions.status).toBe(200);
    expect(versions.body).toEqual({
      data: [
        { version: 2, createdAt: updatedAt, changelog: 'changed tools, timeout', createdBy: liveKeyId },
        { version: 1, createdAt: definition.createdAt, changelog: 'created', createdBy: liveKeyId },
      ],
    });
  });

  it('rolls back to an earlier version, keeps the later ones and numbers the next update after them', async () => {
    const definition = await createDefinition({ systemPrompt: 'one', model: 'openai/gpt-4o' });
    await put(live, `/v1/agent-definitions/${definition.id}`, { systemPrompt: 'two' });

    const rollback = await live.post(`/v1/agent-definitions/${definition.id}/rollback`, { version: 1 });
    expect(rollback.status).toBe(200);
    expect(rollback.body).toEqual({ ok: true, version: 1 });
    expect((await live.get(`/v1/agent-definitions/${definition.id}`)).body).toMatchObject({ version: 1, systemPrompt: 'one' });
    expect(await createAgent({ definition: definition.id })).toMatchObject({ definitionVersion: 1, instructions: 'one' });
    const versions = async () => (await live.get(`/v1/agent-definitions/${definition.id}/versions`)).body.data.map((entry: { version: number }) => entry.version);
    expect(await versions()).toEqual([2, 1]);

    expectError(await live.post(`/v1/agent-definitions/${definition.id}/rollback`, { version: 3 }), 422, 'unprocessable_entity', ['version']);
    expectError(await live.post(`/v1/agent-definitions/${definition.id}/rollback`, { version: 0 }), 422, 'unprocessable_entity', ['version']);
    expectError(await live.post(`/v1/agent-definitions/${definition.id}/rollback`, {}), 422, 'unprocessable_entity', ['version']);

    const third = await put(live, `/v1/agent-definitions/${definition.id}`, { model: null, changelog: 'platform default model' });
    expect(third.body).toMatchObject({ version: 3, systemPrompt: 'one' });
    expect(third.body.model).toBeUndefined();
    expect(await versions()).toEqual([3, 2, 1]);
    expect((await live.post(`/v1/agent-definitions/${definition.id}/rollback`, { version: 2 })).body).toEqual({ ok: true, version: 2 });
    expect((await live.get(`/v1/agent-definitions/${definition.id}`)).body).toMatchObject({ version: 2, systemPrompt: 'two', model: 'openai/gpt-4o' });
  });

  it('refuses an update without a field to change, and invalid ones, with 422', async () => {
    const definition = await createDefinition({ tools: ['exec'] });
    const path = `/v1/agent-definitions/${definition.id}`;
    expectError(await put(live, path, {}), 422, 'unprocessable_entity', ['body']);
    expectError(await put(live, path, { changelog: 'nothing' }), 422, 'unprocessable_entity', ['body']);
    expectError(await put(live, path, { name: 'renamed' }), 422, 'unprocessable_entity', ['body']);
    expectError(await put(live, path, { tools: ['browser_click'] }), 422, 'unprocessable_entity', ['tools']);
    expectError(await put(live, path, { config: { temperature: -1 } }), 422, 'unprocessable_entity', ['config.temperature']);
    expectError(await put(live, path, { compute: null }), 422, 'unprocessable_entity', ['compute']);
    expect((await live.get(`${path}/versions`)).body.data).toHaveLength(1);
  });
});

describe('POST /v1/agent-definitions/:id/duplicate', () => {
  it('makes an independent definition at version 1 from the current version', async () => {
    const original = await createDefinition({ systemPrompt: 'one', config: { temperature: 0.5 } });
    await put(live, `/v1/agent-definitions/${original.id}`, { systemPrompt: 'two' });
    const response = await live.post(`/v1/agent-definitions/${original.id}/duplicate`, { name: 'the copy' });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({ id: expect.stringMatching(/^adef_/), name: 'the copy' });
    expect(response.body.id).not.toBe(original.id);

    const copy = (await live.get(`/v1/agent-definitions/${response.body.id}`)).body;
    expect(copy).toMatchObject({ name: 'the copy', version: 1, systemPrompt: 'two', config: { temperature: 0.5 }, archived: false });
    expect((await live.get(`/v1/agent-definitions/${copy.id}/versions`)).body.data).toEqual([
      expect.objectContaining({ version: 1, changelog: `duplicated from ${original.id} version 2`, createdBy: liveKeyId }),
    ]);

    await put(live, `/v1/agent-definitions/${copy.id}`, { systemPrompt: 'three' });
    expect((await live.get(`/v1/agent-definitions/${original.id}`)).body).toMatchObject({ version: 2, systemPrompt: 'two' });
    expectError(await live.post(`/v1/agent-definitions/${original.id}/duplicate`, { name: 'the copy' }), 409, 'conflict');
    expectError(await live.post(`/v1/agent-definitions/${original.id}/duplicate`, {}), 422, 'unprocessable_entity', ['name']);
  });
});

describe('DELETE /v1/agent-definitions/:id', () => {
  it('archives: readable, not changeable, no new agents, its name free again', async () => {
    const definition = await createDefinition({ name: 'retired bot', systemPrompt: 'old' });
    const before = await createAgent({ definition: 'retired bot' });
    clock.advance(1_000);
    expect((await remove(live, `/v1/agent-definitions/${definition.id}`)).body).toEqual({ ok: true });
    expect((await live.get(`/v1/agent-definitions/${definition.id}`)).body).toMatchObject({
      archived: true,
      version: 1,
      updatedAt: clock.now().toISOString(),
    });
    expect((await remove(live, `/v1/agent-definitions/${definition.id}`)).body).toEqual({ ok: true });
    expect((await live.get(`/v1/agents/${before.id}`)).body).toMatchObject({ definition: definition.id, definitionVersion: 1 });

    for (const reference of [definition.id, 'retired bot']) {
      const refused = await live.post(`/v1/sessions/${sessionId}/agents`, { definition: reference });
      expectError(refused, 422, 'unprocessable_entity', ['definition']);
      expect(refused.body.error.message).toContain(`agent definition ${reference} is archived`);
    }
    expectError(await put(live, `/v1/agent-definitions/${definition.id}`, { systemPrompt: 'new' }), 409, 'conflict');
    expectError(await live.post(`/v1/agent-definitions/${definition.id}/rollback`, { version: 1 }), 409, 'conflict');
    expect((await live.get(`/v1/agent-definitions/${definition.id}/versions`)).body.data).toHaveLength(1);

    const successor = await createDefinition({ name: 'retired bot', systemPrompt: 'new' });
    expect(await createAgent({ definition: 'retired bot' })).toMatchObject({ definition: successor.id, instructions: 'new' });
  });
});

describe('agents from a definition', () => {
  const fields = {
    compute: 'node',
    model: 'anthropic/claude-sonnet-4-5',
    systemPrompt: 'You triage tickets.',
    tools: ['exec', 'read_file'],
    timeout: '30m',
  };

  it('take compute, model, instructions, tools, browser and timeout from it, by id or by name', async () => {
    const definition = await createDefinition({ name: 'triage', ...fields, config: { temperature: 0.1 } });
    const expected = {
      status: 'booting',
      compute: 'node',
      model: 'anthropic/claude-sonnet-4-5',
      instructions: 'You triage tickets.',
      tools: ['exec', 'read_file'],
      browser: false,
      timeout: '30m',
      definition: definition.id,
      definitionVersion: 1,
    };
    expect(await createAgent({ definition: definition.id })).toMatchObject(expected);
    const byName = await createAgent({ definition: 'triage' });
    expect(byName).toMatchObject(expected);
    expect(byName.overrides).toBeUndefined();
    expect((await live.get(`/v1/agents/${byName.id}`)).body).toMatchObject(expected);
  });

  it('apply overrides over the definition, and top-level fields over both', async () => {
    const definition = await createDefinition(fields);
    const overrides = { timeout: '5m', tools: ['list_files'], model: 'openai/gpt-4o-mini', region: 'eu-west-1' };
    const agent = await createAgent({ definition: definition.name, overrides, instructions: 'Top level wins.', timeout: '10m' });
    expect(agent).toMatchObject({
      compute: 'node',
      model: 'openai/gpt-4o-mini',
      instructions: 'Top level wins.',
      tools: ['list_files'],
      timeout: '10m',
      region: 'eu-west-1',
      definition: definition.id,
      definitionVersion: 1,
      overrides,
    });
  });

  it('validate overrides like top-level fields and name them overrides.<field>', async () => {
    const definition = await createDefinition(fields);
    const create = (body: Record<string, unknown>) => live.post(`/v1/sessions/${sessionId}/agents`, { definition: definition.id, ...body });
    expectError(await create({ overrides: { timeout: 'soon' } }), 422, 'unprocessable_entity', ['overrides.timeout']);
    expectError(await create({ overrides: { compute: 'cobol' } }), 422, 'unprocessable_entity', ['overrides.compute']);
    expectError(await create({ overrides: { colour: 'red' } }), 422, 'unprocessable_entity', ['overrides.colour']);
    expectError(await create({ overrides: { temperature: 0.2 } }), 422, 'unprocessable_entity', ['overrides.temperature']);
    expectError(await create({ overrides: { tools: ['teleport'] } }), 422, 'unprocessable_entity', ['overrides.tools']);
    expectError(await create({ overrides: { model: 'acme/large' } }), 422, 'unprocessable_entity', ['overrides.model']);
    expectError(await create({ overrides: { definition: 'other' } }), 422, 'unprocessable_entity', ['overrides.definition']);
    expectError(await create({ overrides: { lifecycle: {} } }), 422, 'unprocessable_entity', ['overrides.lifecycle']);
    expectError(await create({ overrides: { lifecycle: { onTimeout: 'hibernate' } } }), 422, 'unprocessable_entity', ['overrides.lifecycle.onTimeout']);
    const browser = await create({ overrides: { browser: true } });
    expectError(browser, 422, 'unprocessable_entity', ['overrides.browser']);
    expect(browser.body.error.message).toMatch(/^overrides\.browser: .*browser-capable/);
    // A bad top-level field keeps its own name.
    expectError(await create({ overrides: { timeout: '5m' }, timeout: 'never' }), 422, 'unprocessable_entity', ['timeout']);
  });

  it('refuse what the definition asks and the provider cannot give, naming definition.<field>', async () => {
    const definition = await createDefinition({ browser: true, tools: ['browser_navigate'] });
    const refused = await live.post(`/v1/sessions/${sessionId}/agents`, { definition: definition.id });
    expectError(refused, 422, 'unprocessable_entity', ['definition.browser']);
    const fixed = await live.post(`/v1/sessions/${sessionId}/agents`, { definition: definition.id, overrides: { browser: false, tools: [] } });
    expect(fixed.status).toBe(201);
  });

  it('refuse an unknown definition, and overrides without one, with 422', async () => {
    for (const reference of ['no such definition', 'adef_0000000000aaaaaaaaaaaaaaaa']) {
      const response = await live.post(`/v1/sessions/${sessionId}/agents`, { definition: reference });
      expectError(response, 422, 'unprocessable_entity', ['definition']);
      expect(response.body.error.message).toContain(reference);
    }
    expectError(await live.post(`/v1/sessions/${sessionId}/agents`, { overrides: { timeout: '5m' } }), 422, 'unprocessable_entity', ['overrides']);
  });
});

describe('scope', () => {
  it("does not show a definition to another organization or to the organization's test key", async () => {
    const definition = await createDefinition({ name: 'private bot' });
    const path = `/v1/agent-definitions/${definition.id}`;
    for (const client of [otherOrganization, testMode]) {
      expectError(await client.get(path), 404, 'not_found');
      expectError(await put(client, path, { systemPrompt: 'mine now' }), 404, 'not_found');
      expectError(await remove(client, path), 404, 'not_found');
      expectError(await client.get(`${path}/versions`), 404, 'not_found');
      expectError(await client.post(`${path}/rollback`, { version: 1 }), 404, 'not_found');
      expectError(await client.post(`${path}/duplicate`, { name: 'stolen' }), 404, 'not_found');
      const listed = (await client.get('/v1/agent-definitions?includeArchived=true')).body.data;
      expect(listed.map((entry: { id: string }) => entry.id)).not.toContain(definition.id);

      const session = (await client.post('/v1/sessions', { userId: 'outsider' })).body.id;
      for (const reference of [definition.id, 'private bot']) {
        expectError(await client.post(`/v1/sessions/${session}/agents`, { definition: reference }), 422, 'unprocessable_entity', ['definition']);
      }
      // The same name is free in another scope.
      expect((await client.post('/v1/agent-definitions', { name: 'private bot' })).status).toBe(201);
    }
    expect((await live.get(path)).body).toMatchObject({ name: 'private bot', version: 1, archived: false });
    expectError(await live.get('/v1/agent-definitions/not-an-id'), 404, 'not_found');
    expectError(await live.get('/v1/agent-definitions/adef_0000000000aaaaaaaaaaaaaaaa'), 404, 'not_found');
  });
});

describe('the OpenAPI document', () => {
  it('lists the agent definition routes and the agent fields that record the definition', async () => {
    const { body } = await live.get('/v1/openapi.json');
    const paths = body.paths;
    expect(Object.keys(paths['/v1/agent-definitions']).sort()).toEqual(['get', 'post']);
    expect(Object.keys(paths['/v1/agent-definitions/{id}']).sort()).toEqual(['delete', 'get', 'put']);
    expect(paths['/v1/agent-definitions/{id}/versions'].get.operationId).toBe('listAgentDefinitionVersions');
    expect(paths['/v1/agent-definitions/{id}/rollback'].post.responses['422']).toBeDefined();
    expect(paths['/v1/agent-definitions/{id}/duplicate'].post.responses['201']).toBeDefined();
    expect(paths['/v1/agent-definitions'].get.parameters).toEqual([
      expect.objectContaining({ name: 'includeArchived', in: 'query', required: false }),
    ]);
    expect(paths['/v1/agent-definitions'].post.responses['201'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/AgentDefinition' });
    const created = body.components.schemas.AgentDefinition;
    expect(Object.keys(created.properties)).toEqual(
      expect.arrayContaining(['id', 'name', 'version', 'compute', 'model', 'systemPrompt', 'tools', 'browser', 'timeout', 'config', 'archived', 'createdAt', 'updatedAt']),
    );
    const agent = body.components.schemas.Agent;
    expect(agent.properties.definitionVersion.type).toBe('integer');
  });
});
