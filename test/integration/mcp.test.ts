import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually, taskFinished, type ApiClient } from '../helpers/http.js';
import { startFakeMcpServer, type FakeMcpServer } from '../helpers/mcp-server.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * MCP end to end: a real berth process and sandbox, a local MCP server built with the official
 * SDK, and a local OpenAI-compatible model that calls the server's tools by their namespaced names.
 */
function taskOf(body: any): string {
  return body.messages.find((message: any) => message.role === 'user').content;
}

const scenarios: Record<string, FakeTurn> = {
  'who is c42': { text: '', toolCalls: [{ name: 'mcp__crm__lookup_customer', input: { id: 'c42' } }] },
  'export everything': { text: '', toolCalls: [{ name: 'mcp__crm__export_all', input: {} }] },
  'make it explode': { text: '', toolCalls: [{ name: 'mcp__crm__explode', input: {} }] },
  'use the other crm': { text: '', toolCalls: [{ name: 'mcp__crm__lookup_customer', input: { id: 'c7' } }] },
};

const script = (body: any): FakeTurn => {
  const tool = body.messages.filter((message: any) => message.role === 'tool').at(-1);
  if (tool) return { text: `tool said (${tool.content.length} chars): ${tool.content.slice(0, 200)}|${tool.content.slice(-120)}` };
  return scenarios[taskOf(body)] ?? { status: 400, error: 'no scenario' };
};

let openai: FakeModelServer;
let crm: FakeMcpServer;
let berth: BerthProcess;
let live: ApiClient;
let sessionId: string;

beforeAll(async () => {
  openai = await startFakeOpenAI(script);
  crm = await startFakeMcpServer({ token: 'crm-token-1' });
  berth = await startBerth({
    env: {
      DATABASE_URL: await createTestDatabase(),
      BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: openai.baseUrl, apiKeyEnv: 'TEST_OPENAI_KEY' } }),
      TEST_OPENAI_KEY: 'sk-test-openai',
      // The MCP server of this test is on loopback.
      BERTH_WEBHOOK_ALLOW_HTTP: 'true',
      BERTH_WEBHOOK_ALLOW_PRIVATE: 'true',
    },
  });
  live = berth.api(berth.liveKey);
  sessionId = (await live.post('/v1/sessions', { userId: 'mcp-user' })).body.id;
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await Promise.all([openai.close(), crm.close()]);
});

async function readyAgent(body: Record<string, unknown>) {
  const agent = await live.post(`/v1/sessions/${sessionId}/agents`, { model: 'openai/gpt-4o-mini', timeout: '30m', ...body });
  expect(agent.status, JSON.stringify(agent.body)).toBe(201);
  await eventually(async () => ((await live.get(`/v1/agents/${agent.body.id}`)).body.status === 'idle' ? true : undefined), { what: 'agent idle' });
  return agent.body;
}

async function run(agentId: string, task: string) {
  const started = await live.post(`/v1/agents/${agentId}/run`, { task });
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  return taskFinished(live, started.body.taskId);
}

describe('MCP servers', () => {
  let server: any;

  beforeAll(async () => {
    expect((await live.post('/v1/secrets', { CRM_TOKEN: 'crm-token-1' })).status).toBe(200);
    const registered = await live.post('/v1/mcp-servers', { name: 'crm', url: crm.url, secret: 'CRM_TOKEN' });
    expect(registered.status, JSON.stringify(registered.body)).toBe(201);
    server = registered.body;
  });

  it('registers a server with a secret by name, lists it without the value, refuses a taken name', async () => {
    expect(server).toEqual({ id: expect.stringMatching(/^mcp_/), name: 'crm', url: crm.url, secret: 'CRM_TOKEN', header: 'Authorization', createdAt: expect.any(String) });
    const listed = await live.get('/v1/mcp-servers');
    expect(listed.body).toEqual({ data: [server] });
    expect(JSON.stringify(listed.body)).not.toContain('crm-token-1');
    const again = await live.post('/v1/mcp-servers', { name: 'crm', url: crm.url });
    expect([again.status, again.body.error.code]).toEqual([409, 'conflict']);
  });

  it('refuses bad registrations with 422 naming the field', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ name: 'x', url: 'not a url' }, 'url'],
      [{ name: 'x', url: crm.url, secret: 'NO_SUCH_SECRET' }, 'secret'],
      [{ name: 'x', url: crm.url, header: 'X-Key' }, 'header'],
      [{ name: 'bad name!', url: crm.url }, 'name'],
      [{ name: 'x', url: crm.url, extra: 1 }, 'body'],
    ];
    for (const [body, field] of cases) {
      const response = await live.post('/v1/mcp-servers', body);
      expect([response.status, Object.keys(response.body.error.details?.fields ?? {})], JSON.stringify(body)).toEqual([422, [field]]);
    }
    expect((await live.get('/v1/mcp-servers')).body.data).toHaveLength(1);
  });

  it("offers the server's tools, namespaced, and calls them with the secret through the SDK", async () => {
    const agent = await readyAgent({ mcp: ['crm'], tools: ['exec'] });
    const task = await run(agent.id, 'who is c42');
    expect(task.status).toBe('completed');
    expect(task.output).toContain('Ada Lovelace, plan: enterprise');
    const request = openai.requests.find((body: any) => taskOf(body) === 'who is c42') as any;
    expect(request.tools.map((tool: any) => tool.function.name)).toEqual(['exec', 'mcp__crm__explode', 'mcp__crm__export_all', 'mcp__crm__lookup_customer']);
    const lookup = request.tools.find((tool: any) => tool.function.name === 'mcp__crm__lookup_customer');
    expect(lookup.function.parameters.properties.id.type).toBe('string');
    expect(crm.calls).toContainEqual({ tool: 'lookup_customer', arguments: { id: 'c42' } });
    expect(crm.headers.every((headers) => headers.authorization === 'Bearer crm-token-1')).toBe(true);
  });

  it('cuts a large result and hands a tool failure to the model as an error', async () => {
    const agent = await readyAgent({ mcp: '*' });
    const big = await run(agent.id, 'export everything');
    expect(big.output).toMatch(/^tool said \(\d+ chars\)/);
    expect(Number(/\((\d+) chars\)/.exec(big.output)![1])).toBeLessThan(17 * 1024);
    expect(big.output).toContain('[MCP result truncated: 83872 more characters not shown]');
    const failed = await run(agent.id, 'make it explode');
    expect(failed.output).toContain('the CRM is on fire');
    const metrics = parsePrometheus(await fetch(`${berth.baseUrl}/metrics`).then((response) => response.text()));
    expect(metricValue(metrics, 'berth_mcp_calls_total', { server: 'crm', result: 'ok' })).toBe(2);
    expect(metricValue(metrics, 'berth_mcp_calls_total', { server: 'crm', result: 'tool_error' })).toBe(1);
  });

  it('refuses an unknown server on agent creation', async () => {
    const response = await live.post(`/v1/sessions/${sessionId}/agents`, { mcp: ['crm', 'nope'] });
    expect([response.status, response.body.error.details.fields]).toEqual([422, { mcp: ['no MCP server named or with id nope'] }]);
  });

  it('offers nothing from a server whose credential is refused, and the run goes on', async () => {
    await live.post('/v1/secrets', { WRONG_TOKEN: 'not-the-token' });
    expect((await live.post('/v1/mcp-servers', { name: 'crm2', url: crm.url, secret: 'WRONG_TOKEN' })).status).toBe(201);
    const agent = await readyAgent({ mcp: ['crm2'] });
    const task = await run(agent.id, 'use the other crm');
    expect(task.status).toBe('completed');
    expect(task.output).toContain('there is no tool "mcp__crm__lookup_customer"');
    const metrics = parsePrometheus(await fetch(`${berth.baseUrl}/metrics`).then((response) => response.text()));
    expect(metricValue(metrics, 'berth_mcp_connections_total', { server: 'crm2', result: 'failed' })).toBe(1);
  });

  it('deletes a server by name', async () => {
    expect((await live.raw('/v1/mcp-servers/crm2', { method: 'DELETE' })).status).toBe(200);
    expect((await live.raw('/v1/mcp-servers/crm2', { method: 'DELETE' })).status).toBe(404);
  });
});
