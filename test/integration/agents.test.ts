import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { isRunning, removeDataDir, runscContainers } from '../helpers/runsc.js';

let berth: BerthProcess;
let live: ApiClient;
let db: pg.Pool;
let sessionId: string;

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({ env: { DATABASE_URL: databaseUrl, BERTH_EXEC_TIMEOUT: '3s' } });
  live = berth.api(berth.liveKey);
  sessionId = (await live.post('/v1/sessions', { userId: 'agent-tests' })).body.id;
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await db.end();
});

function expectError(response: { status: number; body: any }, status: number, code: string) {
  expect(response.status).toBe(status);
  expect(response.body.error).toMatchObject({ code, message: expect.any(String), details: expect.any(Object) });
  expect(response.body.error.requestId).toMatch(/^req_/);
}

async function createAgent(body: Record<string, unknown> = {}, client = live, session = sessionId) {
  const response = await client.post(`/v1/sessions/${session}/agents`, body);
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body;
}

async function waitForStatus(id: string, status: string, client = live, timeoutMs = 60_000) {
  return eventually(
    async () => {
      const agent = (await client.get(`/v1/agents/${id}`)).body;
      return agent.status === status ? agent : undefined;
    },
    { timeoutMs, what: `agent ${id} to be ${status}` },
  );
}

async function exec(id: string, language: string, code: string) {
  return live.post(`/v1/agents/${id}/exec`, { language, code });
}

describe('an agent in a gVisor sandbox', () => {
  let agent: any;

  beforeAll(async () => {
    agent = await createAgent({ timeout: '10m', instructions: 'be brief' });
  });

  it('is created booting with the defaults, then becomes idle with agent.started written', async () => {
    expect(agent).toMatchObject({
      id: expect.stringMatching(/^agt_[0-9a-z]{26}$/),
      sessionId,
      status: 'booting',
      compute: 'python',
      browser: false,
      model: 'openai/gpt-4o-mini',
      tools: [],
      timeout: '10m',
      provider: 'local',
      instructions: 'be brief',
    });
    const ready = await waitForStatus(agent.id, 'idle');
    // Phase idle, derived from these alone (ADR 18).
    expect(ready.conditions).toEqual([
      expect.objectContaining({ type: 'SandboxReady', status: 'True', reason: 'Provisioned', observedGeneration: 1 }),
      expect.objectContaining({ type: 'Running', status: 'False', reason: 'NoRun', observedGeneration: 1 }),
      expect.objectContaining({ type: 'Paused', status: 'False', reason: 'Active', observedGeneration: 1 }),
      expect.objectContaining({ type: 'BudgetOK', status: 'True', reason: 'WithinBudget', observedGeneration: 1 }),
    ]);
    expect(Date.parse(ready.expiresAt) - Date.parse(ready.startedAt)).toBe(10 * 60_000);
    expect(runscContainers(berth.dataDir)).toContainEqual({ id: agent.id, status: 'running' });
    const { rows } = await db.query('SELECT type, data FROM events WHERE subject_id = $1', [agent.id]);
    expect(rows).toEqual([
      {
        type: 'agent.started',
        data: { agentId: agent.id, sessionId, userId: 'agent-tests', provider: 'local', compute: 'python' },
      },
    ]);
  });

  it('runs python with stdout, stderr and the exit code', async () => {
    const response = await exec(agent.id, 'python', 'import sys\nprint("out", 6 * 7)\nprint("err", file=sys.stderr)\nsys.exit(3)');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ stdout: 'out 42\n', stderr: 'err\n', exitCode: 3, durationMs: expect.any(Number) });
    expect(response.body.durationMs).toBeGreaterThan(0);
  });

  it('runs typescript without a build step', async () => {
    const code = 'interface Point { x: number; y: number }\nconst p: Point = { x: 3, y: 4 };\nconsole.log(Math.hypot(p.x, p.y));\nconsole.error("warned");';
    const response = await exec(agent.id, 'typescript', code);
    expect(response.body).toMatchObject({ stdout: '5\n', stderr: 'warned\n', exitCode: 0 });
  });

  it('reports a typescript error as a non-zero exit', async () => {
    const response = await exec(agent.id, 'typescript', 'throw new Error("boom")');
    expect(response.status).toBe(200);
    expect(response.body.exitCode).toBe(1);
    expect(response.body.stderr).toContain('boom');
  });

  it('runs bash in /workspace, and files stay between execs', async () => {
    const first = await exec(agent.id, 'bash', 'pwd; echo hello > note.txt; ls -l note.txt | wc -l');
    expect(first.body).toMatchObject({ stdout: '/workspace\n1\n', exitCode: 0 });
    const second = await exec(agent.id, 'python', 'print(open("/workspace/note.txt").read().strip())');
    expect(second.body.stdout).toBe('hello\n');
    expect(existsSync(join(berth.dataDir, 'sandboxes', agent.id, 'workspace', 'note.txt'))).toBe(true);
  });

  it('returns when the program exits even if a background child keeps its output open', async () => {
    const started = Date.now();
    const response = await exec(agent.id, 'bash', '(sleep 600 &); echo backgrounded');
    expect(response.body).toMatchObject({ stdout: 'backgrounded\n', exitCode: 0 });
    expect(Date.now() - started).toBeLessThan(2_500);
  });

  it('imports python modules from /workspace', async () => {
    await exec(agent.id, 'bash', 'echo "ANSWER = 42" > /workspace/helper.py');
    const response = await exec(agent.id, 'python', 'from helper import ANSWER\nprint(ANSWER)');
    expect(response.body).toMatchObject({ stdout: '42\n', exitCode: 0 });
  });

  it('cuts stdout at 1 MiB with a marker', async () => {
    const response = await exec(agent.id, 'python', 'import sys\nsys.stdout.write("x" * (3 * 1024 * 1024))');
    expect(response.body.exitCode).toBe(0);
    expect(response.body.stdout.startsWith('x'.repeat(1024 * 1024))).toBe(true);
    expect(response.body.stdout).toContain(`[output truncated: ${2 * 1024 * 1024} more bytes not shown]`);
  });

  it('passes a non-zero bash exit code and output through', async () => {
    const response = await exec(agent.id, 'bash', 'echo partial; echo failing >&2; exit 7');
    expect(response.body).toMatchObject({ stdout: 'partial\n', stderr: 'failing\n', exitCode: 7 });
  });

  it('sees the configured memory limit (1Gi by default)', async () => {
    const response = await exec(agent.id, 'bash', 'head -1 /proc/meminfo');
    expect(response.body.stdout).toMatch(/^MemTotal:\s+1048576 kB\n$/);
  });

  it('has no network by default', async () => {
    const response = await exec(agent.id, 'python', 'import socket\ntry:\n    socket.create_connection(("1.1.1.1", 53), timeout=1)\n    print("connected")\nexcept OSError as e:\n    print("no network")');
    expect(response.body.stdout).toBe('no network\n');
  });

  it('cuts an exec that overruns its limit with 504 timeout, and the sandbox lives on', async () => {
    const started = Date.now();
    const response = await exec(agent.id, 'python', 'import time\ntime.sleep(30)');
    expectError(response, 504, 'timeout');
    expect(Date.now() - started).toBeLessThan(10_000);
    const after = await exec(agent.id, 'bash', 'pgrep -f "time.sleep" || echo none');
    expect(after.body.stdout).toBe('none\n');
  });

  it("reports a program's own exit 124 or 137 after a `timeout:` line as its result, not as a timeout", async () => {
    const notice = "timeout: sending signal TERM to command 'python3'";
    for (const status of [124, 137]) {
      const response = await exec(agent.id, 'bash', `echo partial; echo "${notice}" >&2; exit ${status}`);
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      expect(response.body).toMatchObject({ exitCode: status, stdout: 'partial\n', stderr: `${notice}\n` });
    }
  });

  it.each([
    [{ language: 'ruby', code: 'puts 1' }, 'language'],
    [{ language: 'python' }, 'code'],
    [{ code: 'print(1)' }, 'language'],
    [{ language: 'python', code: 1 }, 'code'],
    [{ language: 'python', code: 'print(1)', memory: 5 }, 'body'],
    [{ language: 'python', code: 'print(1)', timeout: 500 }, 'timeout'],
  ])('rejects exec body %j with 422', async (body, field) => {
    const response = await live.post(`/v1/agents/${agent.id}/exec`, body);
    expectError(response, 422, 'unprocessable_entity');
    expect(Object.keys(response.body.error.details.fields)).toContain(field);
  });

  it('counts requests, execs, provisions and sandboxes in /metrics', async () => {
    const response = await fetch(`${berth.baseUrl}/metrics`);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const samples = parsePrometheus(await response.text());
    expect(metricValue(samples, 'berth_http_requests_total', { route: '/v1/agents/:id/exec', status: '200' })).toBeGreaterThanOrEqual(5);
    expect(metricValue(samples, 'berth_http_requests_total', { route: '/v1/agents/:id/exec', status: '504' })).toBe(1);
    expect(metricValue(samples, 'berth_http_request_duration_seconds_count', { route: '/v1/sessions/:id/agents', method: 'POST' })).toBeGreaterThanOrEqual(1);
    expect(metricValue(samples, 'berth_exec_duration_seconds_count', { provider: 'local', language: 'python', result: 'ok' })).toBeGreaterThanOrEqual(2);
    expect(metricValue(samples, 'berth_sandbox_provision_duration_seconds_count', { provider: 'local', result: 'success' })).toBeGreaterThanOrEqual(1);
    expect(metricValue(samples, 'berth_sandboxes', { provider: 'local', phase: 'idle' })).toBeGreaterThanOrEqual(1);
    expect(metricValue(samples, 'berth_reconcile_total', { kind: 'Agent' })).toBeGreaterThanOrEqual(1);
  });

  it('terminates: the sandbox and its files are gone, and it cannot be used again', async () => {
    const response = await live.post(`/v1/agents/${agent.id}/terminate`);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ ok: true });
    const terminated = (await live.get(`/v1/agents/${agent.id}`)).body;
    expect(terminated.status).toBe('terminated');
    expect(terminated.endedAt).toEqual(expect.any(String));
    expect(runscContainers(berth.dataDir).map((container) => container.id)).not.toContain(agent.id);
    expect(existsSync(join(berth.dataDir, 'sandboxes', agent.id))).toBe(false);
    expectError(await exec(agent.id, 'bash', 'true'), 409, 'conflict');
    expect((await live.post(`/v1/agents/${agent.id}/terminate`)).body).toEqual({ ok: true });
    expect((await live.get(`/v1/agents/${agent.id}`)).body.status).toBe('terminated');
  });
});

describe('create and wait in one call: POST …/agents?waitFor=', () => {
  const count = async () => (await live.get(`/v1/sessions/${sessionId}/agents?limit=100`)).body.data.length;

  it('answers 201 once the agent is idle, with agent.started written', async () => {
    const created = await live.post(`/v1/sessions/${sessionId}/agents?waitFor=idle&waitSeconds=60`, { timeout: '10m' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ id: expect.stringMatching(/^agt_/), status: 'idle', sessionId });
    expect(created.body.conditions).toContainEqual(expect.objectContaining({ type: 'SandboxReady', status: 'True' }));
    const { rows } = await db.query("SELECT 1 FROM events WHERE subject_id = $1 AND type = 'agent.started'", [created.body.id]);
    expect(rows).toHaveLength(1);
    expect((await exec(created.body.id, 'bash', 'echo ready')).body.stdout).toBe('ready\n');
    await live.post(`/v1/agents/${created.body.id}/terminate`);
  });

  it('answers at waitSeconds with the agent as it is when the status is not reached', async () => {
    const started = Date.now();
    const created = await live.post(`/v1/sessions/${sessionId}/agents?waitFor=paused&waitSeconds=1`, { timeout: '10m' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    expect(['booting', 'idle']).toContain(created.body.status);
    await live.post(`/v1/agents/${created.body.id}/terminate`);
  });

  it('answers as soon as the agent ends, whatever it waited for', async () => {
    const started = Date.now();
    const created = await live.post(`/v1/sessions/${sessionId}/agents?waitFor=paused&waitSeconds=60`, { timeout: '2s' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ status: 'failed', error: { code: 'timeout' } });
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it('waits for an agent made from a definition the same way', async () => {
    const definition = (await live.post('/v1/agent-definitions', { name: `waited ${Date.now()}`, compute: 'python' })).body;
    const created = await live.post(`/v1/sessions/${sessionId}/agents?waitFor=idle,running`, { definition: definition.id, timeout: '10m' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ status: 'idle', definition: definition.id });
    await live.post(`/v1/agents/${created.body.id}/terminate`);
  });

  it.each([
    ['waitFor=sleeping', 'waitFor'],
    ['waitFor=idle,', 'waitFor'],
    ['waitFor=', 'waitFor'],
    ['waitFor=idle&waitSeconds=0', 'waitSeconds'],
    ['waitFor=idle&waitSeconds=61', 'waitSeconds'],
    ['waitFor=idle&colour=red', 'query'],
  ])('refuses ?%s with 422 naming %s, and creates nothing', async (query, field) => {
    const before = await count();
    const refused = await live.post(`/v1/sessions/${sessionId}/agents?${query}`, { timeout: '10m' });
    expectError(refused, 422, 'unprocessable_entity');
    expect(Object.keys(refused.body.error.details.fields)).toContain(field);
    expect(await count()).toBe(before);
  });

  it('answers 404 for a session that does not exist, as without waitFor', async () => {
    expectError(await live.post('/v1/sessions/ses_00000000000000000000000000/agents?waitFor=idle', { timeout: '10m' }), 404, 'not_found');
    expect((await live.get('/healthz')).status).toBe(200);
  });

  it('refuses a bad body with its 422 before any wait, and creates nothing', async () => {
    const before = await count();
    const started = Date.now();
    expectError(await live.post(`/v1/sessions/${sessionId}/agents?waitFor=idle&waitSeconds=30`, { compute: 'ruby' }), 422, 'unprocessable_entity');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await count()).toBe(before);
  });
});

describe('agent timeout', () => {
  it('ends the sandbox when the timeout expires and fails the agent with agent.failed', async () => {
    const agent = await createAgent({ timeout: '3s' });
    expect(agent.timeout).toBe('3s');
    await waitForStatus(agent.id, 'idle');
    const failed = await waitForStatus(agent.id, 'failed', live, 20_000);
    expect(failed.error).toEqual({ code: 'timeout', message: expect.stringContaining('3s') });
    expect(runscContainers(berth.dataDir).map((container) => container.id)).not.toContain(agent.id);
    expectError(await exec(agent.id, 'bash', 'true'), 409, 'conflict');
    const { rows } = await db.query('SELECT type, data FROM events WHERE subject_id = $1 ORDER BY seq', [agent.id]);
    expect(rows.map((row) => row.type)).toEqual(['agent.started', 'agent.failed']);
    expect(rows[1].data.error.code).toBe('timeout');
  });

  it('answers the calls that race its end with 409, never a provider error', async () => {
    const agent = await createAgent({ timeout: '4s' });
    await waitForStatus(agent.id, 'idle');
    // File calls back to back across the timeout: each one either works, or is refused as the
    // agent's end (conflict) whether it came before the call, or while it ran.
    const statuses: number[] = [];
    const deadline = Date.now() + 20_000;
    for (let n = 0; Date.now() < deadline; n++) {
      const response = await live.post(`/v1/agents/${agent.id}/files/mkdir`, { path: `/workspace/d${n}` });
      statuses.push(response.status);
      if (response.status !== 201) {
        expect(response.status, JSON.stringify(response.body)).toBe(409);
        expectError(response, 409, 'conflict');
        if (response.body.error.details.status === 'failed') break;
      }
    }
    expect(statuses).toContain(201);
    expect(statuses.at(-1)).toBe(409);
    expect((await waitForStatus(agent.id, 'failed', live, 20_000)).error.code).toBe('timeout');
  });
});

describe('a sandbox that dies under its agent', () => {
  it('answers exec with 502 provider_error naming the provider', async () => {
    const agent = await createAgent({ timeout: '5m' });
    await waitForStatus(agent.id, 'idle');
    // The sandbox's own processes (its gofer and its kernel), by pid: the operator may start a new
    // sandbox for the agent meanwhile, whose processes name it too.
    const sandboxPids = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.includes(agent.id) && /runsc-(sandbox|gofer)/.test(line))
      .map((line) => Number(line.trim().split(/\s+/)[0]));
    expect(sandboxPids.length).toBeGreaterThan(0);
    execFileSync('runsc', [`--root=${join(berth.dataDir, 'runsc')}`, 'delete', '--force', agent.id]);
    // runsc returns once it has sent the kill: the sandbox's processes end a moment later.
    await eventually(async () => (sandboxPids.some(isRunning) ? undefined : true), { timeoutMs: 10_000, what: 'the sandbox to end' });
    const response = await exec(agent.id, 'bash', 'echo hi');
    if (response.status === 200) {
      // The operator saw the sandbox die first and started a new one (SandboxLost): the exec ran
      // there, in a sandbox whose processes are not the dead one's.
      expect(response.body).toMatchObject({ stdout: 'hi\n', exitCode: 0 });
      const now = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
        .split('\n')
        .filter((line) => line.includes(agent.id) && /runsc-sandbox/.test(line))
        .map((line) => Number(line.trim().split(/\s+/)[0]));
      expect(now.length).toBeGreaterThan(0);
      expect(now.filter((pid) => sandboxPids.includes(pid))).toEqual([]);
    } else {
      expectError(response, 502, 'provider_error');
      expect(response.body.error.details).toMatchObject({ provider: 'local', sandbox: agent.id });
      expect(response.body.error.message).toContain('the sandbox is gone');
    }
    await live.post(`/v1/agents/${agent.id}/terminate`);
  });
});

describe('compute', () => {
  it('runs a go agent with the Go toolchain', async () => {
    const agent = await createAgent({ compute: 'go' });
    await waitForStatus(agent.id, 'idle', live, 120_000);
    const response = await exec(agent.id, 'bash', 'go version');
    expect(response.body.stdout).toMatch(/^go version go1\.\d+/);
    await live.post(`/v1/agents/${agent.id}/terminate`);
  });
});

describe('agent creation input', () => {
  it.each([
    ['unknown compute', { compute: 'ruby' }, 'compute'],
    ['timeout with an unknown unit', { timeout: '5x' }, 'timeout'],
    ['zero timeout', { timeout: '0s' }, 'timeout'],
    ['empty timeout', { timeout: '' }, 'timeout'],
    ['numeric timeout', { timeout: 300 }, 'timeout'],
    ['negative timeout', { timeout: '-5m' }, 'timeout'],
    ['browser not a boolean', { browser: 'yes' }, 'browser'],
    ['model without a vendor', { model: 'gpt-4o' }, 'model'],
    ['tools not a list', { tools: 'exec' }, 'tools'],
    ['fractional costCap', { costCap: { amount: 9.99, currency: 'usd' } }, 'costCap.amount'],
    ['costCap without currency', { costCap: { amount: 100 } }, 'costCap.currency'],
    ['secret name with a dash', { secrets: ['MY-KEY'] }, 'secrets.0'],
    ['mcp neither list nor *', { mcp: 'all' }, 'mcp'],
    ['knowledge a number', { knowledge: 3 }, 'knowledge'],
    ['unknown field', { colour: 'red' }, 'body'],
    ['unknown provider', { provider: 'aws-lambda' }, 'provider'],
    ['unknown fallback provider', { providerFallback: 'nowhere' }, 'providerFallback'],
    ['storage (no provider supports it)', { storage: '10Gi' }, 'storage'],
    ['browser without a browser template', { browser: true }, 'browser'],
    ['gpu on the local provider', { gpu: 'a100' }, 'gpu'],
  ])('rejects %s with 422 naming the field, and creates nothing', async (_name, body, field) => {
    const before = (await live.get(`/v1/sessions/${sessionId}/agents?limit=100`)).body.data.length;
    const response = await live.post(`/v1/sessions/${sessionId}/agents`, body);
    expectError(response, 422, 'unprocessable_entity');
    expect(Object.keys(response.body.error.details.fields)).toContain(field);
    expect(response.body.error.message.length).toBeGreaterThan(10);
    expect((await live.get(`/v1/sessions/${sessionId}/agents?limit=100`)).body.data).toHaveLength(before);
  });

  it('answers a create in a session that does not exist with 404, whatever else is wrong with it', async () => {
    // The session and the provider's BYOI configuration are read together; the session's answer comes first.
    expectError(await live.post('/v1/sessions/ses_00000000000000000000000000/agents', { provider: 'aws-lambda' }), 404, 'not_found');
    expectError(await live.post('/v1/sessions/ses_00000000000000000000000000/agents', {}), 404, 'not_found');
  });

  it('explains storage and browser refusals', async () => {
    const storage = await live.post(`/v1/sessions/${sessionId}/agents`, { storage: '10Gi' });
    expect(storage.body.error.message).toMatch(/storage.*not supported/);
    const browser = await live.post(`/v1/sessions/${sessionId}/agents`, { browser: true });
    expect(browser.body.error.message).toMatch(/browser-capable/);
  });

  it('answers bad lifecycle values and unknown sub-fields with 422 naming them', async () => {
    const response = await live.post(`/v1/sessions/${sessionId}/agents`, { lifecycle: { onTimeout: 'sleep' } });
    expectError(response, 422, 'unprocessable_entity');
    expect(Object.keys(response.body.error.details.fields)).toEqual(['lifecycle.onTimeout']);
    expectError(await live.post(`/v1/sessions/${sessionId}/agents`, { lifecycle: { autoPause: '5m' } }), 422, 'unprocessable_entity');
  });

  it('caps the timeout at 24h', async () => {
    const agent = await createAgent({ timeout: '48h' });
    expect(agent.timeout).toBe('24h');
    await live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('accepts compound durations and normalises them', async () => {
    const agent = await createAgent({ timeout: '90m' });
    expect(agent.timeout).toBe('1h30m');
    await live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('stores the fields it shows (the policy fields not enforced yet are 501: bad-input.test.ts; metadata.extract is a JSON schema)', async () => {
    const fields = {
      model: 'anthropic/claude-sonnet-4-5',
      tools: ['exec', 'read_file'],
      costCap: { amount: 250, currency: 'usd' },
      region: 'eu-west-1',
      providerFallback: 'local',
      metadata: { extract: { schema: { type: 'object', properties: { name: { type: 'string' } } } }, team: 'a' },
      secrets: ['OPENAI_API_KEY'],
    };
    expect((await live.post('/v1/secrets', { OPENAI_API_KEY: 'sk-stored-for-this-test' })).status).toBe(200);
    const agent = await createAgent(fields);
    expect(agent).toMatchObject(fields);
    expect((await live.get(`/v1/agents/${agent.id}`)).body).toMatchObject(fields);
    await live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('is 404 for an unknown session, and for agents of another key mode', async () => {
    expectError(await live.post('/v1/sessions/ses_01m80gqv9d4kjqfcmvs2q4jxem/agents', {}), 404, 'not_found');
    const agent = await createAgent({ timeout: '1m' });
    const test = berth.api(berth.testKey);
    expectError(await test.get(`/v1/agents/${agent.id}`), 404, 'not_found');
    expectError(await test.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'true' }), 404, 'not_found');
    expectError(await test.post(`/v1/agents/${agent.id}/terminate`), 404, 'not_found');
    expectError(await live.get('/v1/agents/agt_01m80gqv9d4kjqfcmvs2q4jxem'), 404, 'not_found');
    await live.post(`/v1/agents/${agent.id}/terminate`);
  });
});

describe('test keys', () => {
  it('get the same routes and validation, and mock results without a sandbox', async () => {
    const test = berth.api(berth.testKey);
    const session = (await test.post('/v1/sessions', { userId: 'tester' })).body;
    expectError(await test.post(`/v1/sessions/${session.id}/agents`, { storage: '1Gi' }), 422, 'unprocessable_entity');
    expectError(await test.post(`/v1/sessions/${session.id}/agents`, { lifecycle: {} }), 422, 'unprocessable_entity');
    expectError(await test.post(`/v1/sessions/${session.id}/agents`, { lifecycle: { onTimeout: 'later' } }), 422, 'unprocessable_entity');
    const agent = await createAgent({}, test, session.id);
    expect(agent).toMatchObject({ status: 'booting', provider: 'local', compute: 'python' });
    await waitForStatus(agent.id, 'idle', test);
    const result = await test.post(`/v1/agents/${agent.id}/exec`, { language: 'python', code: 'print(1)' });
    expect(result.status).toBe(200);
    expect(result.body).toEqual({ stdout: expect.stringContaining('test mode'), stderr: '', exitCode: 0, durationMs: expect.any(Number) });
    expectError(await test.post(`/v1/agents/${agent.id}/exec`, { language: 'cobol', code: '' }), 422, 'unprocessable_entity');
    expect(runscContainers(berth.dataDir).map((container) => container.id)).not.toContain(agent.id);
    expect(existsSync(join(berth.dataDir, 'sandboxes', agent.id))).toBe(false);
    expect((await test.post(`/v1/agents/${agent.id}/terminate`)).body).toEqual({ ok: true });
    expect((await test.get(`/v1/agents/${agent.id}`)).body.status).toBe('terminated');
  });
});

describe('GET /v1/sessions/:id/agents', () => {
  it('lists the agents of a session, newest first', async () => {
    const session = (await live.post('/v1/sessions', { userId: 'lister' })).body;
    const first = await createAgent({ timeout: '1m' }, live, session.id);
    const second = await createAgent({ timeout: '1m' }, live, session.id);
    const page = await live.get(`/v1/sessions/${session.id}/agents`);
    expect(page.body.data.map((agent: any) => agent.id)).toEqual([second.id, first.id]);
    expect(page.body.hasMore).toBe(false);
    for (const agent of [first, second]) await live.post(`/v1/agents/${agent.id}/terminate`);
  });
});
