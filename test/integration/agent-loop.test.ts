import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresResourceStore, silentLogger, systemClock } from '../../common/src/index.js';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { startFakeAnthropic, startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually, taskFinished, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir } from '../helpers/runsc.js';
import { openSse, runEvents } from '../helpers/sse.js';

/**
 * The agent loop end to end: a real berth process, real gVisor sandboxes, and local servers that
 * speak the OpenAI and Anthropic wire protocols, scripted per scenario. The scenario is the task
 * text; the turn is how many answers the model has given in the conversation so far.
 */
type Scenario = (turn: number, body: any) => FakeTurn;
const failedOnce = new Set<string>();

const scenarios: Record<string, Scenario> = {
  'compute and report': (turn) =>
    [
      { text: 'I will compute it first.', toolCalls: [{ name: 'exec', input: { language: 'python', code: 'print(6 * 7)' } }], usage: { input: 1200, output: 40 } },
      { text: 'Now the report.', toolCalls: [{ name: 'write_file', input: { path: 'report.md', content: '# Answer\n42\n' } }], usage: { input: 1500, output: 60 } },
      { text: 'The answer is 42; it is in report.md.', usage: { input: 1800, output: 20 } },
    ][turn]!,
  // The first request of each run fails; the retry (the same conversation) succeeds.
  'flaky model': (_turn, body) =>
    failedOnce.has(JSON.stringify(body.messages))
      ? { text: 'done after a retry', usage: { input: 10, output: 3 } }
      : (failedOnce.add(JSON.stringify(body.messages)), { status: 500, error: 'upstream hiccup' }),
  'tool error': (turn) =>
    [
      { text: '', toolCalls: [{ name: 'read_file', input: { path: 'missing.txt' } }] },
      { text: '', toolCalls: [{ name: 'exec', input: { language: 'cobol', code: 'x' } }] },
      { text: 'The file is missing.' },
    ][turn]!,
  // 600 input tokens at $10 a million: 0.6 cents a call.
  costly: (turn) =>
    turn === 0
      ? { text: 'One step.', toolCalls: [{ name: 'exec', input: { language: 'bash', code: 'echo step' } }], usage: { input: 600, output: 0 } }
      : { text: 'should not be asked', usage: { input: 700, output: 0 } },
  'never ends': () => ({ text: 'again', toolCalls: [{ name: 'exec', input: { language: 'bash', code: 'true' } }] }),
  // One call of 100,000 input tokens: $1 at openai/pricey's $10 a million.
  'one dollar call': () => ({ text: 'one call', usage: { input: 100_000, output: 0 } }),
  'slow tool': (turn) =>
    turn === 0
      ? { text: 'Sleeping.', toolCalls: [{ name: 'exec', input: { language: 'bash', code: 'sleep 2; echo woke > woke.txt; echo woke' } }] }
      : { text: 'should not be asked' },
};

function taskOf(body: any): string {
  const first = body.messages.find((message: any) => message.role === 'user');
  return typeof first.content === 'string' ? first.content : first.content[0].text;
}

function answersSoFar(body: any): number {
  return body.messages.filter((message: any) => message.role === 'assistant').length;
}

const script = (body: any): FakeTurn => {
  const scenario = scenarios[taskOf(body)];
  if (!scenario) return { status: 400, error: `no scenario for task ${taskOf(body)}` };
  return scenario(answersSoFar(body), body);
};

let openai: FakeModelServer;
let anthropic: FakeModelServer;
let unauthorized: FakeModelServer;
let berth: BerthProcess;
let live: ApiClient;
let db: pg.Pool;
let store: PostgresResourceStore;
let databaseUrl: string;

beforeAll(async () => {
  openai = await startFakeOpenAI(script, { apiKey: 'sk-test-openai' });
  anthropic = await startFakeAnthropic(script, { apiKey: 'sk-test-anthropic' });
  unauthorized = await startFakeOpenAI([], { apiKey: 'the-right-key' });
  databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({
    env: {
      DATABASE_URL: databaseUrl,
      BERTH_MODEL_PROVIDERS: JSON.stringify({
        openai: { api: 'openai', baseUrl: openai.baseUrl, apiKeyEnv: 'TEST_OPENAI_KEY' },
        anthropic: { api: 'anthropic', baseUrl: anthropic.baseUrl, apiKeyEnv: 'TEST_ANTHROPIC_KEY' },
        wrongkey: { api: 'openai', baseUrl: unauthorized.baseUrl, apiKeyEnv: 'TEST_OPENAI_KEY' },
      }),
      TEST_OPENAI_KEY: 'sk-test-openai',
      TEST_ANTHROPIC_KEY: 'sk-test-anthropic',
      BERTH_RUN_MAX_STEPS: '4',
      BERTH_MODEL_PRICES: JSON.stringify({ 'openai/pricey': { input: '10.00', output: '10.00' } }),
      BERTH_STREAM_HEARTBEAT: '1s',
      // The customer's own model server of the BYOI tests is on loopback too.
      BERTH_BYOI_ALLOW_HTTP: 'true',
      BERTH_BYOI_ALLOW_PRIVATE: 'true',
    },
  });
  live = berth.api(berth.liveKey);
  store = new PostgresResourceStore(db, { connectionString: databaseUrl, clock: systemClock, log: silentLogger });
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await store.close();
  await db.end();
  await Promise.all([openai.close(), anthropic.close(), unauthorized.close()]);
});

async function readyAgent(body: Record<string, unknown>, client = live) {
  const session = (await client.post('/v1/sessions', { userId: 'loop-user' })).body;
  const agent = (await client.post(`/v1/sessions/${session.id}/agents`, { timeout: '30m', ...body })).body;
  expect(agent.id, JSON.stringify(agent)).toMatch(/^agt_/);
  await eventually(async () => ((await client.get(`/v1/agents/${agent.id}`)).body.status === 'idle' ? true : undefined), { what: 'agent idle' });
  return { session, agent };
}

const finished = (taskId: string, client = live) => taskFinished(client, taskId);

describe('a run against an OpenAI-compatible model', () => {
  let agent: any;
  let session: any;
  let taskId: string;
  let stream: Awaited<ReturnType<typeof openSse>>;

  beforeAll(async () => {
    ({ agent, session } = await readyAgent({
      model: 'openai/gpt-4o-mini',
      instructions: 'You are a careful analyst.',
      tools: ['exec', 'write_file', 'read_file', 'list_files'],
    }));
    stream = await openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream`, berth.liveKey);
    const response = await live.post(`/v1/agents/${agent.id}/run`, { task: 'compute and report' });
    expect(response.status).toBe(202);
    expect(response.body).toEqual({ taskId: expect.stringMatching(/^task_[0-9a-z]{26}$/), agentId: agent.id });
    taskId = response.body.taskId;
    await stream.waitFor((events) => events.some((event) => event.event === 'output'));
  });
  afterAll(() => stream.close());

  it('streams every event of the run in order, with ids', () => {
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toContain('text/event-stream');
    const events = runEvents(stream.events);
    const kinds = events.map((event) => event.event).filter((kind, index, all) => kind !== 'thinking' || all[index - 1] !== 'thinking');
    expect(kinds).toEqual(['thinking', 'tool_call', 'tool_result', 'thinking', 'tool_call', 'tool_result', 'thinking', 'output']);
    const ids = events.map((event) => Number(event.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    for (const event of events) expect(event.data.taskId).toBe(taskId);
    const thinking = events.filter((event) => event.event === 'thinking').map((event) => event.data.text).join('');
    expect(thinking).toBe('I will compute it first.Now the report.The answer is 42; it is in report.md.');
    const [execCall, execResult, writeCall, writeResult] = events.filter((event) => event.event.startsWith('tool_'));
    expect(execCall!.data).toMatchObject({ tool: 'exec', input: { language: 'python', code: 'print(6 * 7)' } });
    expect(execResult!.data).toMatchObject({ tool: 'exec', exitCode: 0, isError: false, id: execCall!.data.id });
    expect(execResult!.data.output).toContain('42');
    expect(execResult!.data.durationMs).toBeGreaterThan(0);
    expect(writeCall!.data).toMatchObject({ tool: 'write_file', input: { path: 'report.md' } });
    expect(writeResult!.data).toMatchObject({ tool: 'write_file', isError: false, exitCode: 0 });
    const output = events.at(-1)!;
    // gpt-4o-mini: 4,500 input tokens at $0.15/M and 120 output tokens at $0.60/M = 0.0675 + 0.0072 cents: rounds to 0.
    expect(output.data).toEqual({ taskId, text: 'The answer is 42; it is in report.md.', cost: { amount: 0, currency: 'usd' } });
  });

  it('ran the tools in the sandbox for real', () => {
    const report = join(berth.dataDir, 'sandboxes', agent.id, 'workspace', 'report.md');
    expect(existsSync(report)).toBe(true);
    expect(readFileSync(report, 'utf8')).toBe('# Answer\n42\n');
  });

  it('sent the model the system prompt, the tools and the tool results, with the platform key', () => {
    const requests = openai.requests.filter((body: any) => taskOf(body) === 'compute and report') as any[];
    expect(requests).toHaveLength(3);
    expect(requests[0].model).toBe('gpt-4o-mini');
    expect(requests[0].messages[0]).toEqual({ role: 'system', content: 'You are a careful analyst.' });
    expect(requests[0].tools.map((tool: any) => tool.function.name)).toEqual(['exec', 'write_file', 'read_file', 'list_files']);
    const toolMessage = requests[1].messages.find((message: any) => message.role === 'tool');
    expect(toolMessage.content).toContain('42');
    expect(requests[2].messages.filter((message: any) => message.role === 'tool')).toHaveLength(2);
    expect(openai.apiKeys().every((key) => key === 'sk-test-openai')).toBe(true);
  });

  it('records the run: task state, ledger rows in nanocents, and the lifecycle events', async () => {
    const task = await finished(taskId);
    expect(task).toMatchObject({ status: 'completed', output: 'The answer is 42; it is in report.md.', steps: 3, usage: { inputTokens: 4500, outputTokens: 120 } });
    const { rows: ledger } = await db.query('SELECT kind, provider, model, input_tokens, output_tokens, amount_nanocents, billing_mode FROM usage_ledger WHERE task_id = $1 ORDER BY id', [taskId]);
    expect(ledger).toEqual([
      { kind: 'model', provider: 'openai', model: 'openai/gpt-4o-mini', input_tokens: '1200', output_tokens: '40', amount_nanocents: String(1200 * 15_000 + 40 * 60_000), billing_mode: 'managed' },
      { kind: 'model', provider: 'openai', model: 'openai/gpt-4o-mini', input_tokens: '1500', output_tokens: '60', amount_nanocents: String(1500 * 15_000 + 60 * 60_000), billing_mode: 'managed' },
      { kind: 'model', provider: 'openai', model: 'openai/gpt-4o-mini', input_tokens: '1800', output_tokens: '20', amount_nanocents: String(1800 * 15_000 + 20 * 60_000), billing_mode: 'managed' },
    ]);
    const { rows: events } = await db.query('SELECT type, data FROM events WHERE subject_id = $1 ORDER BY seq', [agent.id]);
    expect(events.map((event) => event.type)).toEqual(['agent.started', 'agent.completed', 'agent.run.completed']);
    expect(events[1].data).toEqual({
      agentId: agent.id,
      sessionId: session.id,
      userId: 'loop-user',
      taskId,
      status: 'completed',
      output: 'The answer is 42; it is in report.md.',
      artifacts: ['/workspace/report.md'],
      cost: { amount: 0, currency: 'usd' },
      compute: { provider: 'local', durationMs: expect.any(Number) },
      model: { provider: 'openai', model: 'gpt-4o-mini', inputTokens: 4500, outputTokens: 120 },
    });
    expect(events[2].data).toMatchObject({ taskId, status: 'completed', cost: { model: 0, compute: 0, total: 0, currency: 'usd' }, billingMode: 'managed' });
    // The phase follows the task by one notification and one reconcile (ADR 18).
    await eventually(async () => ((await live.get(`/v1/agents/${agent.id}`)).body.status === 'idle' ? true : undefined), { what: 'the agent to be idle' });
  });

  it('replays what a reconnecting client missed, from Last-Event-ID, to several subscribers', async () => {
    const events = runEvents(stream.events);
    const afterFirstToolCall = events.find((event) => event.event === 'tool_call')!.id!;
    const replays = await Promise.all([
      openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream`, berth.liveKey, { 'last-event-id': afterFirstToolCall }),
      openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream?lastEventId=${afterFirstToolCall}`, berth.liveKey),
    ]);
    for (const replay of replays) {
      await replay.waitFor((received) => received.some((event) => event.event === 'output'));
      expect(runEvents(replay.events).map((event) => event.id)).toEqual(events.slice(events.findIndex((event) => event.id === afterFirstToolCall) + 1).map((event) => event.id));
      replay.close();
    }
  });

  it('sends heartbeats without ids', async () => {
    await stream.waitFor((events) => events.some((event) => event.event === 'heartbeat'), 5_000);
    const heartbeat = stream.events.find((event) => event.event === 'heartbeat')!;
    expect(heartbeat.id).toBeUndefined();
    expect(heartbeat.data.t).toEqual(expect.any(Number));
  });

  it('answers 404 for the stream of an unknown agent', async () => {
    const missing = await live.get('/v1/agents/agt_01m80gqv9d4kjqfcmvs2q4jxem/stream');
    expect(missing.status).toBe(404);
  });
});

describe('a run against an Anthropic model', () => {
  it('runs the same loop over the messages API', async () => {
    const { agent } = await readyAgent({
      model: 'anthropic/claude-sonnet-4-5',
      instructions: 'Be brief.',
      tools: ['exec', 'write_file'],
      modelSettings: { temperature: 0.3, maxTokens: 900, topP: 0.9 },
    });
    const stream = await openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream`, berth.liveKey);
    const { taskId } = (await live.post(`/v1/agents/${agent.id}/run`, { task: 'compute and report' })).body;
    await stream.waitFor((events) => events.some((event) => event.event === 'output'));
    stream.close();
    expect((await finished(taskId)).output).toBe('The answer is 42; it is in report.md.');
    const requests = anthropic.requests as any[];
    expect(requests[0]).toMatchObject({ model: 'claude-sonnet-4-5', system: 'Be brief.', stream: true, temperature: 0.3, max_tokens: 900, top_p: 0.9 });
    expect(requests[0].tools.map((tool: any) => tool.name)).toEqual(['exec', 'write_file']);
    expect(requests[1].messages.at(-1).content[0]).toMatchObject({ type: 'tool_result', is_error: false });
    // Sonnet 4.5: 4,500 in at $3/M and 120 out at $15/M = 1.35 + 0.18 cents = 2 cents.
    expect(runEvents(stream.events).at(-1)!.data.cost).toEqual({ amount: 2, currency: 'usd' });
  });
});

describe('failures', () => {
  it('retries a model 500 and completes', async () => {
    const { agent } = await readyAgent({ tools: ['exec'] });
    const { taskId } = (await live.post(`/v1/agents/${agent.id}/run`, { task: 'flaky model' })).body;
    expect(await finished(taskId)).toMatchObject({ status: 'completed', output: 'done after a retry' });
    const samples = parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text());
    expect(metricValue(samples, 'berth_runner_model_retries_total', { vendor: 'openai', status: '500' })).toBeGreaterThanOrEqual(1);
  });

  it('fails a run whose model answers 401 with provider_error, agent.failed and an error event; the agent stays usable', async () => {
    const { agent } = await readyAgent({ model: 'wrongkey/some-model' });
    const stream = await openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream`, berth.liveKey);
    const { taskId } = (await live.post(`/v1/agents/${agent.id}/run`, { task: 'anything' })).body;
    const task = await finished(taskId);
    expect(task.status).toBe('failed');
    expect(task.error).toMatchObject({ code: 'provider_error' });
    await stream.waitFor((events) => events.some((event) => event.event === 'error'));
    stream.close();
    expect(runEvents(stream.events).at(-1)!.data).toMatchObject({ taskId, code: 'provider_error', upstreamStatus: 401 });
    const { rows } = await db.query("SELECT data FROM events WHERE subject_id = $1 AND type = 'agent.failed'", [agent.id]);
    expect(rows).toEqual([{ data: expect.objectContaining({ taskId, error: { code: 'provider_error', message: expect.stringContaining('401') } }) }]);
    // The agent's reconciler derives idle from the finished task on its next pass (ADR 18).
    await eventually(async () => ((await live.get(`/v1/agents/${agent.id}`)).body.status === 'idle' ? true : undefined), { what: 'the agent to be idle' });
    expect(unauthorized.requests).toHaveLength(1); // 401 is not retried
  });

  it('feeds tool errors back to the model and carries on', async () => {
    const { agent } = await readyAgent({ tools: ['exec', 'read_file'] });
    const stream = await openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream`, berth.liveKey);
    const { taskId } = (await live.post(`/v1/agents/${agent.id}/run`, { task: 'tool error' })).body;
    expect(await finished(taskId)).toMatchObject({ status: 'completed', output: 'The file is missing.' });
    await stream.waitFor((events) => events.some((event) => event.event === 'output'));
    stream.close();
    const results = runEvents(stream.events).filter((event) => event.event === 'tool_result');
    expect(results[0]!.data).toMatchObject({ tool: 'read_file', isError: true });
    expect(results[0]!.data.output).toContain('No such file');
    expect(results[1]!.data).toMatchObject({ tool: 'exec', isError: true, output: expect.stringContaining('"language" must be one of') });
  });

  it('stops before the model call that would cross the cost cap, pauses the agent and names it in budget.exhausted', async () => {
    const { agent } = await readyAgent({ model: 'openai/pricey', tools: ['exec'], costCap: { amount: 1, currency: 'usd' } });
    const asked = () => openai.requests.filter((body: any) => taskOf(body) === 'costly').length;
    const { taskId } = (await live.post(`/v1/agents/${agent.id}/run`, { task: 'costly' })).body;
    const task = await finished(taskId);
    expect(task).toMatchObject({ status: 'failed', steps: 1, error: { code: 'budget_exhausted', message: expect.stringContaining('would cross') } });
    expect(asked()).toBe(1); // the second call (about 0.6 cents more) was never made
    const { rows: spent } = await db.query('SELECT sum(amount_nanocents)::text AS nanocents FROM usage_ledger WHERE agent_id = $1', [agent.id]);
    expect(spent[0].nanocents).toBe('600000000');
    await eventually(async () => ((await live.get(`/v1/agents/${agent.id}`)).body.status === 'paused' ? true : undefined), { what: 'the agent paused' });
    const { rows } = await db.query(
      "SELECT type, data FROM events WHERE subject_id = $1 AND type IN ('budget.exhausted', 'agent.paused') ORDER BY seq",
      [agent.id],
    );
    expect(rows.map((row: any) => row.type)).toEqual(['budget.exhausted', 'agent.paused']);
    expect(rows[0].data).toMatchObject({ agentId: agent.id, limit: 'costCap', finalCost: { amount: 1, currency: 'usd' }, maxCost: { amount: 1, currency: 'usd' }, pausedAgents: [agent.id] });
    expect(rows[1].data.reason).toBe('cost_cap');
  });

  it('stops at the step limit', async () => {
    const { agent } = await readyAgent({ tools: ['exec'] });
    const { taskId } = (await live.post(`/v1/agents/${agent.id}/run`, { task: 'never ends' })).body;
    const task = await finished(taskId);
    expect(task).toMatchObject({ status: 'failed', steps: 4, error: { code: 'step_limit' } });
  });

  it('lets a tool call in flight finish when the agent is paused, then stops', async () => {
    const { agent } = await readyAgent({ tools: ['exec'] });
    const stream = await openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream`, berth.liveKey);
    const { taskId } = (await live.post(`/v1/agents/${agent.id}/run`, { task: 'slow tool' })).body;
    await stream.waitFor((events) => events.some((event) => event.event === 'tool_call'));
    await store.updateSpec('Agent', agent.id.replace('_', '-'), (current) => ({ ...current.spec, desiredState: 'paused' }));
    const task = await finished(taskId);
    expect(task).toMatchObject({ status: 'cancelled', error: { code: 'cancelled', message: expect.stringContaining('paused') } });
    await stream.waitFor((events) => events.some((event) => event.event === 'error'));
    stream.close();
    const kinds = runEvents(stream.events).map((event) => event.event);
    expect(kinds.slice(-3)).toEqual(['tool_call', 'tool_result', 'error']);
    expect(runEvents(stream.events).find((event) => event.event === 'tool_result')!.data.output).toContain('woke');
    expect(existsSync(join(berth.dataDir, 'sandboxes', agent.id, 'workspace', 'woke.txt'))).toBe(true);
    const asked = (openai.requests as any[]).filter((body) => taskOf(body) === 'slow tool' && body.messages.some((message: any) => message.role === 'tool'));
    expect(asked).toHaveLength(0);
  });

  it('stops a run when the agent is terminated during it', async () => {
    const { agent } = await readyAgent({ tools: ['exec'] });
    const { taskId } = (await live.post(`/v1/agents/${agent.id}/run`, { task: 'slow tool' })).body;
    await eventually(async () => ((await live.get(`/v1/tasks/${taskId}`)).body.status === 'running' ? true : undefined));
    expect((await live.post(`/v1/agents/${agent.id}/terminate`)).body).toEqual({ ok: true });
    const task = await finished(taskId);
    expect(task).toMatchObject({ status: 'cancelled', error: { code: 'cancelled', message: expect.stringContaining('terminated') } });
    expect((await live.get(`/v1/agents/${agent.id}`)).body.status).toBe('terminated');
  });
});

describe('run requests', () => {
  it('allows one run at a time per agent: a second one is 409 naming the first', async () => {
    const { agent } = await readyAgent({ tools: ['exec'] });
    const first = await live.post(`/v1/agents/${agent.id}/run`, { task: 'slow tool' });
    const second = await live.post(`/v1/agents/${agent.id}/run`, { task: 'compute and report' });
    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({ code: 'conflict', details: { taskId: first.body.taskId } });
    await finished(first.body.taskId);
    const third = await live.post(`/v1/agents/${agent.id}/run`, { task: 'flaky model' });
    expect(third.status).toBe(202);
    await finished(third.body.taskId);
  });

  it.each([[{}], [{ task: '' }], [{ task: 5 }], [{ task: 'x', extra: true }]])('rejects %j with 422', async (body) => {
    const { agent } = await readyAgent({});
    const response = await live.post(`/v1/agents/${agent.id}/run`, body);
    expect(response.status).toBe(422);
    expect(response.body.error.code).toBe('unprocessable_entity');
  });

  it('refuses unknown tools, browser tools without a browser, and unconfigured model vendors at agent creation', async () => {
    const session = (await live.post('/v1/sessions', { userId: 'tools' })).body;
    const unknown = await live.post(`/v1/sessions/${session.id}/agents`, { tools: ['exec', 'teleport'] });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.details.fields.tools[0]).toMatch(/^unknown tool teleport; valid tools: exec, read_file, write_file, list_files/);
    const browserTool = await live.post(`/v1/sessions/${session.id}/agents`, { tools: ['browser_navigate'] });
    expect(browserTool.status).toBe(422);
    expect(browserTool.body.error.message).toContain('browser: true');
    const vendor = await live.post(`/v1/sessions/${session.id}/agents`, { model: 'mistral/large' });
    expect(vendor.status).toBe(422);
    expect(vendor.body.error.details.fields.model[0]).toContain('no model provider "mistral"');
  });
});

describe('test keys', () => {
  it('run a realistic mock loop: same routes, events and stream, no model called, no usage', async () => {
    const test = berth.api(berth.testKey);
    const { agent } = await readyAgent({ tools: ['exec'] }, test);
    const before = openai.requests.length;
    const stream = await openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream`, berth.testKey);
    const run = await test.post(`/v1/agents/${agent.id}/run`, { task: 'summarise the report' });
    expect(run.status).toBe(202);
    await stream.waitFor((events) => events.some((event) => event.event === 'output'));
    stream.close();
    const kinds = runEvents(stream.events).map((event) => event.event).filter((kind, index, all) => kind !== 'thinking' || all[index - 1] !== 'thinking');
    expect(kinds).toEqual(['thinking', 'tool_call', 'tool_result', 'thinking', 'output']);
    expect(runEvents(stream.events).at(-1)!.data).toMatchObject({ text: expect.stringContaining('[test mode]'), cost: { amount: 0, currency: 'usd' } });
    expect(openai.requests.length).toBe(before);
    expect((await db.query('SELECT count(*)::int AS n FROM usage_ledger WHERE task_id = $1', [run.body.taskId])).rows[0].n).toBe(0);
    const task = await finished(run.body.taskId, test);
    expect(task.status).toBe('completed');
    expect((await live.get(`/v1/tasks/${run.body.taskId}`)).status).toBe(404);
  });
});

describe('BYOI models: an organization configures its own model vendor account', () => {
  const CUSTOMER_KEY = `sk-customer-${randomBytes(16).toString('hex')}`;
  let customer: FakeModelServer;
  let agentId: string;

  const summary = async () => (await live.get('/v1/usage/summary?period=today')).body;
  const runOnce = async () => {
    const response = await live.post(`/v1/agents/${agentId}/run`, { task: 'one dollar call' });
    expect(response.status).toBe(202);
    return { taskId: response.body.taskId as string, task: await finished(response.body.taskId) };
  };
  const ledgerOf = async (taskId: string) =>
    (await db.query('SELECT provider, model, amount_nanocents, billing_mode FROM usage_ledger WHERE task_id = $1 ORDER BY id', [taskId])).rows;
  const runEvent = async (taskId: string) =>
    (await db.query("SELECT data FROM events WHERE subject_id = $1 AND type = 'agent.run.completed' AND data->>'taskId' = $2", [agentId, taskId])).rows[0]?.data;

  beforeAll(async () => {
    // The customer's own OpenAI-compatible endpoint (their Azure or vLLM, say): only their key opens it.
    customer = await startFakeOpenAI(script, { apiKey: CUSTOMER_KEY });
    ({ agent: { id: agentId } } = await readyAgent({ model: 'openai/pricey' }));
  });
  afterAll(async () => {
    await customer.close();
  });

  it("sends the calls to the organization's endpoint with its key, billed as byoi_models under providerDirect", async () => {
    expect((await live.post('/v1/secrets', { CUSTOMER_OPENAI_KEY: CUSTOMER_KEY })).body).toEqual({ ok: true, count: 1 });
    const configured = await live.raw('/v1/providers/openai', {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ credentialRef: 'CUSTOMER_OPENAI_KEY', config: { baseUrl: customer.baseUrl } }),
    });
    expect(configured.body).toEqual({ ok: true, provider: 'openai', mode: 'byoi' });
    const before = await summary();
    const platformCalls = openai.requests.length;

    const { taskId, task } = await runOnce();
    expect(task).toMatchObject({ status: 'completed', output: 'one call' });
    expect(customer.requests).toHaveLength(1);
    expect(customer.apiKeys()).toEqual([CUSTOMER_KEY]);
    expect((customer.requests[0] as any).model).toBe('pricey');
    expect(openai.requests.length).toBe(platformCalls);
    expect(await ledgerOf(taskId)).toEqual([{ provider: 'openai', model: 'openai/pricey', amount_nanocents: '100000000000', billing_mode: 'byoi_models' }]);
    expect(await runEvent(taskId)).toMatchObject({ status: 'completed', billingMode: 'byoi_models', cost: { model: 100 } });

    const after = await summary();
    expect(after.providerDirect.model.amount - before.providerDirect.model.amount).toBe(100);
    expect(after.berthBilled.model).toEqual(before.berthBilled.model);
  });

  it('fails the run with provider_error naming the secret once the secret is gone, never falling back to the platform key', async () => {
    expect((await live.raw('/v1/secrets/CUSTOMER_OPENAI_KEY', { method: 'DELETE' })).body).toEqual({ ok: true });
    const platformCalls = openai.requests.length;
    const { taskId, task } = await runOnce();
    expect(task).toMatchObject({ status: 'failed', error: { code: 'provider_error', message: expect.stringContaining('CUSTOMER_OPENAI_KEY') } });
    expect(JSON.stringify(task)).not.toContain(CUSTOMER_KEY);
    expect(customer.requests).toHaveLength(1);
    expect(openai.requests.length).toBe(platformCalls);
    expect(await ledgerOf(taskId)).toEqual([]);
    // The task's end wakes the agent's reconcile, which derives idle from it a moment later.
    await expect.poll(async () => (await live.get(`/v1/agents/${agentId}`)).body.status, { timeout: 10_000 }).toBe('idle');
    // Back for the next test: the configuration is still there.
    expect((await live.post('/v1/secrets', { CUSTOMER_OPENAI_KEY: CUSTOMER_KEY })).status).toBe(200);
  });

  it("runs on the platform's endpoint and key again, managed, once the configuration is deleted", async () => {
    const removed = await live.raw('/v1/providers/openai', { method: 'DELETE' });
    expect(removed.body).toEqual({ ok: true, provider: 'openai', mode: 'managed' });
    const before = await summary();
    const platformCalls = openai.requests.length;

    const { taskId, task } = await runOnce();
    expect(task).toMatchObject({ status: 'completed', output: 'one call' });
    expect(customer.requests).toHaveLength(1);
    expect(openai.requests.length).toBe(platformCalls + 1);
    expect(openai.apiKeys().at(-1)).toBe('sk-test-openai');
    expect(await ledgerOf(taskId)).toEqual([{ provider: 'openai', model: 'openai/pricey', amount_nanocents: '100000000000', billing_mode: 'managed' }]);
    expect(await runEvent(taskId)).toMatchObject({ status: 'completed', billingMode: 'managed' });

    const after = await summary();
    expect(after.berthBilled.model.amount - before.berthBilled.model.amount).toBe(100);
    expect(after.providerDirect.model).toEqual(before.providerDirect.model);
  });
});
