import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeModelServer } from '../helpers/fake-models.js';
import { COUNTER_STATE, parseCounterState } from '../helpers/counter.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';

/**
 * The `lifecycle` policy with real gVisor sandboxes: an agent without traffic is paused by
 * checkpoint (reason idle) and the next exec, file call or proxied request wakes it, its background
 * processes still running; file traffic keeps it awake; a
 * sandbox that dies is recreated up to `onFailure.restart` times, then the agent fails.
 */
let berth: BerthProcess;
let live: ApiClient;
let db: pg.Pool;
let sessionId: string;
let model: FakeModelServer;
let env: Record<string, string>;

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  model = await startFakeOpenAI(() => ({ text: 'hi' }), { apiKey: 'sk-lifecycle' });
  env = {
    DATABASE_URL: databaseUrl,
    BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl, apiKeyEnv: 'TEST_LIFECYCLE_KEY' } }),
    TEST_LIFECYCLE_KEY: 'sk-lifecycle',
  };
  berth = await startBerth({ env });
  live = berth.api(berth.liveKey);
  sessionId = (await live.post('/v1/sessions', { userId: 'lifecycle' })).body.id;
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await db.end();
  await model.close();
});

function expectError(response: { status: number; body: any }, status: number, code: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error.code).toBe(code);
}

const create = (body: Record<string, unknown>) => live.post(`/v1/sessions/${sessionId}/agents`, { timeout: '1h', ...body });
const exec = (id: string, code: string, extra: Record<string, unknown> = {}) => live.post(`/v1/agents/${id}/exec`, { language: 'bash', code, ...extra });
const status = async (id: string) => (await live.get(`/v1/agents/${id}`)).body;

async function until(id: string, wanted: (agent: any) => boolean, what: string, timeoutMs = 60_000) {
  return eventually(async () => {
    const agent = await status(id);
    return wanted(agent) ? agent : undefined;
  }, { timeoutMs, what, intervalMs: 100 });
}

/** A counter started as a background process: its argv names counter.tmp, which COUNTER_STATE looks for. */
const BACKGROUND_COUNTER = `exec python3 -c '
import os, time
open("/workspace/counter.pid", "w").write(str(os.getpid()))
n = 0
while True:
    n += 1
    open("/workspace/counter.tmp", "w").write(str(n))
    os.replace("/workspace/counter.tmp", "/workspace/counter")
    time.sleep(0.1)
'`;

describe('lifecycle values', () => {
  it('answers 422 naming the sub-field for bad values', async () => {
    for (const [lifecycle, field] of [
      [{ idle: { pauseAfter: 'soon' } }, 'lifecycle.idle.pauseAfter'],
      [{ idle: {} }, 'lifecycle.idle.pauseAfter'],
      [{ onFailure: { restart: 11 } }, 'lifecycle.onFailure.restart'],
      [{ onFailure: { restart: -1 } }, 'lifecycle.onFailure.restart'],
      [{ onFailure: { restart: 1.5 } }, 'lifecycle.onFailure.restart'],
      [{ idle: { pauseAfter: '1m', after: '2m' } }, 'lifecycle.idle'],
      [{ idle: { terminateAfter: 'never' } }, 'lifecycle.idle.terminateAfter'],
      [{ idle: { pauseAfter: '10m', terminateAfter: '10m' } }, 'lifecycle.idle.terminateAfter'],
      [{ onTimeout: 'hibernate' }, 'lifecycle.onTimeout'],
      [{ onTimeout: true }, 'lifecycle.onTimeout'],
      [{ sleep: true }, 'lifecycle'],
      [{}, 'lifecycle'],
      ['1m', 'lifecycle'],
    ] as const) {
      const response = await create({ lifecycle });
      expectError(response, 422, 'unprocessable_entity');
      expect(Object.keys(response.body.error.details.fields), JSON.stringify(lifecycle)).toContain(field);
    }
  });

  it('answers 422 inside overrides too, and writes nothing for a refused request', async () => {
    const definition = (await live.post('/v1/agent-definitions', { name: 'lifecycle-def' })).body;
    const overridden = await create({ definition: definition.id, overrides: { lifecycle: { idle: { pauseAfter: '1h', terminateAfter: '5m' } } } });
    expectError(overridden, 422, 'unprocessable_entity');
    expect(Object.keys(overridden.body.error.details.fields)).toEqual(['overrides.lifecycle.idle.terminateAfter']);
    expect((await live.get(`/v1/sessions/${sessionId}/agents`)).body.data).toEqual([]);
  });

  it('stores the policy with the agent and shows it; one from overrides too', async () => {
    const definition = (await live.post('/v1/agent-definitions', { name: 'lifecycle-kept' })).body;
    const made = await create({ definition: definition.id, overrides: { lifecycle: { onFailure: { restart: 2 } } } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body.lifecycle).toEqual({ onFailure: { restart: 2 } });
    expect((await status(made.body.id)).lifecycle).toEqual({ onFailure: { restart: 2 } });
    await live.post(`/v1/agents/${made.body.id}/terminate`);
    const full = { idle: { pauseAfter: '10m', terminateAfter: '2h' }, onFailure: { restart: 1 }, onTimeout: 'pause' };
    const all = await create({ lifecycle: full });
    expect(all.status, JSON.stringify(all.body)).toBe(201);
    expect((await status(all.body.id)).lifecycle).toEqual(full);
    await live.post(`/v1/agents/${all.body.id}/terminate`);
  });
});

describe('idle auto-pause and wake', () => {
  let agent: any;
  let before: { pid: string; count: number; alive: boolean };

  beforeAll(async () => {
    const made = await create({ lifecycle: { idle: { pauseAfter: '3s' } } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    agent = made.body;
    expect(agent.lifecycle).toEqual({ idle: { pauseAfter: '3s' } });
    await until(agent.id, (current) => current.status === 'idle', 'the agent to be idle');
    const started = await exec(agent.id, BACKGROUND_COUNTER, { background: true });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    await eventually(async () => ((await exec(agent.id, 'cat /workspace/counter')).body.stdout ? true : undefined), { what: 'the counter to count' });
    before = parseCounterState((await exec(agent.id, COUNTER_STATE)).body.stdout);
    expect(before.alive).toBe(true);
  });

  it('stays running while it has traffic', async () => {
    // Execs every second for longer than pauseAfter keep it running.
    for (let i = 0; i < 5; i++) {
      expect((await exec(agent.id, 'true')).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    expect((await status(agent.id)).status).toBe('idle');
  });

  it('is paused by checkpoint with reason idle after pauseAfter without traffic; agent.paused says idle', async () => {
    const paused = await until(agent.id, (current) => current.status === 'paused', 'the idle agent to be paused');
    expect(paused.pauseReason).toBe('idle');
    const { rows } = await db.query("SELECT data FROM events WHERE subject_id = $1 AND type = 'agent.paused'", [agent.id]);
    expect(rows).toEqual([{ data: expect.objectContaining({ agentId: agent.id, reason: 'idle', level: 'native' }) }]);
  });

  it('is woken by the next exec, which waits for the resume; the background process still counts', async () => {
    const woken = await exec(agent.id, COUNTER_STATE);
    expect(woken.status, JSON.stringify(woken.body)).toBe(200);
    const after = parseCounterState(woken.body.stdout);
    expect(after.pid).toBe(before.pid);
    expect(after.alive).toBe(true);
    expect(after.count).toBeGreaterThanOrEqual(before.count);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const later = parseCounterState((await exec(agent.id, COUNTER_STATE)).body.stdout);
    expect(later.count).toBeGreaterThan(after.count);
    const current = await status(agent.id);
    expect(current).toMatchObject({ status: 'idle', lifecycle: { idle: { pauseAfter: '3s' } } });
    expect(current.pauseReason).toBeUndefined();
    const processes = (await live.get(`/v1/agents/${agent.id}/processes`)).body;
    expect(processes.data ?? processes).toEqual(expect.arrayContaining([expect.objectContaining({ status: 'running' })]));
  });

  it('is paused again when idle again, counted in /metrics, and woken by a run too', async () => {
    await until(agent.id, (current) => current.status === 'paused', 'the agent to be paused a second time');
    const { rows } = await db.query("SELECT count(*)::int AS n FROM events WHERE subject_id = $1 AND type = 'agent.paused'", [agent.id]);
    expect(rows[0].n).toBe(2);
    const samples = parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text());
    expect(metricValue(samples, 'berth_agent_idle_pauses_total', { provider: 'local' })).toBeGreaterThanOrEqual(2);
    expect(metricValue(samples, 'berth_agent_wake_duration_seconds_count', { provider: 'local', result: 'woken' })).toBe(1);
    const run = await live.post(`/v1/agents/${agent.id}/run`, { task: 'say hi' });
    expect(run.status, JSON.stringify(run.body)).toBe(202);
    expect((await status(agent.id)).status).toMatch(/^(idle|running)$/);
    const task = await eventually(async () => {
      const current = (await live.get(`/v1/tasks/${run.body.taskId}`)).body;
      return current.status === 'completed' ? current : undefined;
    }, { what: 'the run to complete' });
    expect(task.output).toBe('hi');
  });
});

/** A server whose one answer takes six seconds, a line a second: a proxied request open longer than pauseAfter. */
const SLOW_SERVER = `exec python3 -c '
import http.server, time
class Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        for i in range(6):
            self.wfile.write(b"line %d\\n" % i)
            self.wfile.flush()
            time.sleep(1)
http.server.HTTPServer(("127.0.0.1", 8001), Slow).serve_forever()
'`;

describe('idle wake by files and ports', () => {
  let id: string;
  const port = 8000;
  const proxied = (path = '') => `/v1/agents/${id}/ports/${port}/proxy/${path}`;
  const put = (path: string, body: string) => live.raw(`/v1/agents/${id}/files?path=${path}&parents=true`, { method: 'PUT', body, headers: { 'content-type': 'application/octet-stream' } });

  beforeAll(async () => {
    const made = await create({ lifecycle: { idle: { pauseAfter: '3s' } } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    id = made.body.id;
    await until(id, (current) => current.status === 'idle', 'the agent to be idle');
    expect((await put('site/index.html', '<h1>served from the sandbox</h1>')).status).toBe(201);
    const server = await exec(id, `cd /workspace/site && exec python3 -m http.server ${port} --bind 127.0.0.1`, { background: true });
    expect(server.status, JSON.stringify(server.body)).toBe(202);
    expect((await live.post(`/v1/agents/${id}/ports`, { port })).status).toBe(201);
    expect((await exec(id, SLOW_SERVER, { background: true })).status).toBe(202);
    expect((await live.post(`/v1/agents/${id}/ports`, { port: 8001 })).status).toBe(201);
    await eventually(async () => ((await live.get(proxied('index.html'))).status === 200 ? true : undefined), { what: 'http.server to answer through the proxy' });
  });

  it('stays awake while only its files are used', async () => {
    const wakes = (await db.query("SELECT count(*)::int AS n FROM events WHERE subject_id = $1 AND type = 'agent.paused'", [id])).rows[0].n;
    // Two seconds apart, longer in all than pauseAfter: each file call is traffic.
    for (const call of [
      () => live.get(`/v1/agents/${id}/files/list?path=site`),
      () => live.get(`/v1/agents/${id}/files/stat?path=site/index.html`),
      () => put('site/note.txt', 'kept awake'),
      () => live.get(`/v1/agents/${id}/files?path=site/note.txt`),
    ]) {
      const answer = await call();
      expect(answer.status, JSON.stringify(answer.body)).toBeLessThan(300);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
    expect((await status(id)).status).toBe('idle');
    expect((await db.query("SELECT count(*)::int AS n FROM events WHERE subject_id = $1 AND type = 'agent.paused'", [id])).rows[0].n).toBe(wakes);
  });

  it('stays awake while a proxied request is open longer than pauseAfter, which ends whole', async () => {
    const pauses = (await db.query("SELECT count(*)::int AS n FROM events WHERE subject_id = $1 AND type = 'agent.paused'", [id])).rows[0].n;
    const slow = await live.get(`/v1/agents/${id}/ports/8001/proxy/`);
    expect(slow.status, JSON.stringify(slow.body)).toBe(200);
    expect(slow.body).toBe('line 0\nline 1\nline 2\nline 3\nline 4\nline 5\n');
    expect((await status(id)).status).toBe('idle');
    expect((await db.query("SELECT count(*)::int AS n FROM events WHERE subject_id = $1 AND type = 'agent.paused'", [id])).rows[0].n).toBe(pauses);
  });

  it('is woken by a file download, which answers the file', async () => {
    const paused = await until(id, (current) => current.status === 'paused', 'the agent to be paused without traffic');
    expect(paused.pauseReason).toBe('idle');
    const download = await live.get(`/v1/agents/${id}/files?path=site/note.txt`);
    expect(download.status, JSON.stringify(download.body)).toBe(200);
    expect(download.body).toBe('kept awake');
    const current = await status(id);
    expect(current.status).toMatch(/^(idle|running)$/);
    expect(current.pauseReason).toBeUndefined();
  });

  it('is woken by a proxied request, answered by the http.server started before the pause', async () => {
    const pids = (await live.get(`/v1/agents/${id}/processes`)).body.data.map((process: any) => process.pid);
    await until(id, (current) => current.status === 'paused', 'the agent to be paused again');
    const wakes = async () => metricValue(parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text()), 'berth_agent_wake_duration_seconds_count', { provider: 'local', result: 'woken' });
    const woken = await wakes();
    const page = await live.get(proxied('index.html'));
    expect(page.status, JSON.stringify(page.body)).toBe(200);
    expect(page.body).toBe('<h1>served from the sandbox</h1>');
    expect((await status(id)).status).toMatch(/^(idle|running)$/);
    // The same server process, resumed with the sandbox, not a new one.
    const processes = (await live.get(`/v1/agents/${id}/processes`)).body.data;
    expect(processes.map((process: any) => process.pid)).toEqual(pids);
    expect(processes.map((process: any) => process.status)).toEqual(['running', 'running']);
    expect(await wakes()).toBe(woken + 1);
  });

  it('answers 409 to files and the proxy of an agent paused by request, and does not wake it', async () => {
    const paused = await live.post(`/v1/agents/${id}/pause`, {});
    expect([200, 202], JSON.stringify(paused.body)).toContain(paused.status);
    await until(id, (current) => current.status === 'paused', 'the agent to be paused by request');
    expectError(await live.get(`/v1/agents/${id}/files?path=site/note.txt`), 409, 'conflict');
    expectError(await live.get(proxied('index.html')), 409, 'conflict');
    expect((await status(id)).status).toBe('paused');
    await live.post(`/v1/agents/${id}/terminate`);
  });
});

describe('restart on sandbox death (onFailure)', () => {
  const kill = (agentId: string) => {
    execFileSync('runsc', [`--root=${join(berth.dataDir, 'runsc')}`, 'kill', '--all', agentId, 'KILL']);
  };

  it('recreates a sandbox that died up to restart times, saying so in agent.restarted, then fails the agent', async () => {
    const made = await create({ lifecycle: { onFailure: { restart: 1 } } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const id = made.body.id;
    await until(id, (current) => current.status === 'idle', 'the agent to be idle');
    expect((await exec(id, 'echo kept > /workspace/note')).status).toBe(200);

    kill(id);
    // An exec finds the sandbox dead and has the operator look at once.
    await eventually(async () => {
      await exec(id, 'true');
      const current = await status(id);
      return current.restarts === 1 && current.status === 'idle' ? current : undefined;
    }, { timeoutMs: 60_000, what: 'the sandbox to be recreated', intervalMs: 200 });
    const again = await exec(id, 'cat /workspace/note');
    expect(again.body).toMatchObject({ stdout: 'kept\n', exitCode: 0 });
    const { rows } = await db.query("SELECT data FROM events WHERE subject_id = $1 AND type = 'agent.restarted'", [id]);
    expect(rows).toEqual([{ data: expect.objectContaining({ agentId: id, restart: 1, allowed: 1 }) }]);

    kill(id);
    const failed = await eventually(async () => {
      await exec(id, 'true');
      const current = await status(id);
      return current.status === 'failed' ? current : undefined;
    }, { timeoutMs: 60_000, what: 'the agent to fail', intervalMs: 200 });
    expect(failed.error).toMatchObject({ code: 'sandbox_lost' });
    expect(failed.error.message).toContain('lifecycle.onFailure.restart: 1');
    expect(failed.conditions[0]).toMatchObject({ reason: 'RestartLimitReached' });
    const events = await db.query("SELECT type FROM events WHERE subject_id = $1 AND type IN ('agent.restarted', 'agent.failed') ORDER BY created_at", [id]);
    expect(events.rows.map((row) => row.type)).toEqual(['agent.restarted', 'agent.failed']);
  });
});

describe('across a restart of Berth', () => {
  it('keeps the policy with the agent: an agent made before the restart is paused when idle after it, and woken', async () => {
    const made = await create({ lifecycle: { idle: { pauseAfter: '4s' } } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const id = made.body.id;
    await until(id, (current) => current.status === 'idle', 'the agent to be idle');
    const key = berth.liveKey;
    expect(await berth.stop()).toBe(0);
    berth = await startBerth({ dataDir: berth.dataDir, env });
    live = berth.api(key);
    expect((await status(id)).lifecycle).toEqual({ idle: { pauseAfter: '4s' } });
    const paused = await until(id, (current) => current.status === 'paused', 'the agent to be paused after the restart');
    expect(paused.pauseReason).toBe('idle');
    const woken = await exec(id, 'echo awake');
    expect(woken.body, JSON.stringify(woken.body)).toMatchObject({ stdout: 'awake\n', exitCode: 0 });
  });
});

describe('idle termination (terminateAfter)', () => {
  it('terminates an agent paused by its idle policy, and one never paused, after terminateAfter without traffic; agent.terminated says idle', async () => {
    const pausedFirst = await create({ lifecycle: { idle: { pauseAfter: '2s', terminateAfter: '8s' } } });
    const onlyTerminate = await create({ lifecycle: { idle: { terminateAfter: '4s' } } });
    expect(pausedFirst.status, JSON.stringify(pausedFirst.body)).toBe(201);
    expect(onlyTerminate.status, JSON.stringify(onlyTerminate.body)).toBe(201);
    await until(pausedFirst.body.id, (current) => current.status === 'paused', 'the agent to be paused when idle');
    expect((await status(onlyTerminate.body.id)).status).not.toBe('paused');
    for (const made of [pausedFirst, onlyTerminate]) {
      const ended = await until(made.body.id, (current) => current.status === 'terminated', 'the idle agent to be terminated');
      expect(ended.endedAt).toBeDefined();
      const { rows } = await db.query("SELECT data FROM events WHERE subject_id = $1 AND type = 'agent.terminated'", [made.body.id]);
      expect(rows).toEqual([{ data: expect.objectContaining({ agentId: made.body.id, reason: 'idle', terminateAfter: made.body.lifecycle.idle.terminateAfter }) }]);
      expectError(await exec(made.body.id, 'true'), 409, 'conflict');
    }
    const { rows } = await db.query("SELECT count(*)::int AS n FROM events WHERE subject_id = $1 AND type = 'agent.paused'", [pausedFirst.body.id]);
    expect(rows[0].n).toBe(1);
    // Its pause snapshot went with it.
    await eventually(async () => ((await live.get(`/v1/snapshots?agentId=${pausedFirst.body.id}`)).body.data.length === 0 ? true : undefined), {
      what: 'the pause snapshot to be deleted',
    });
    const samples = parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text());
    expect(metricValue(samples, 'berth_agent_lifecycle_actions_total', { provider: 'local', action: 'idle_terminate' })).toBeGreaterThanOrEqual(2);
  });
});

describe('pause at the timeout (onTimeout: pause)', () => {
  it('pauses the agent by checkpoint at its timeout instead of ending it; a resume gives it a new lifetime with its files and processes', async () => {
    const made = await create({ timeout: '8s', lifecycle: { onTimeout: 'pause' } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const ready = await until(made.body.id, (current) => current.status === 'idle', 'the agent to be idle');
    expect((await exec(made.body.id, 'echo kept > /workspace/kept.txt')).status).toBe(200);
    expect((await exec(made.body.id, BACKGROUND_COUNTER, { background: true })).status).toBe(202);
    await eventually(async () => ((await exec(made.body.id, 'cat /workspace/counter')).body.stdout ? true : undefined), { what: 'the counter to count' });
    const paused = await until(made.body.id, (current) => current.status !== 'idle' && current.status !== 'running', 'the timeout to pause the agent');
    expect(paused.status).toBe('paused');
    expect(paused.pauseReason).toBe('timeout');
    expect(paused.error).toBeUndefined();
    const { rows } = await db.query("SELECT data FROM events WHERE subject_id = $1 AND type IN ('agent.paused', 'agent.failed')", [made.body.id]);
    expect(rows).toEqual([{ data: expect.objectContaining({ reason: 'timeout', level: 'native' }) }]);
    // Not woken by a call: its timeout, not its idle policy, paused it.
    expectError(await exec(made.body.id, 'true'), 409, 'conflict');

    const resumed = await live.post(`/v1/agents/${made.body.id}/resume`);
    expect(resumed.status, JSON.stringify(resumed.body)).toBeLessThan(300);
    const again = await until(made.body.id, (current) => current.status === 'idle', 'the agent to be resumed');
    expect(Date.parse(again.expiresAt)).toBeGreaterThan(Date.parse(ready.expiresAt));
    expect((await exec(made.body.id, 'cat /workspace/kept.txt')).body.stdout).toBe('kept\n');
    expect(parseCounterState((await exec(made.body.id, COUNTER_STATE)).body.stdout).alive).toBe(true);
    // And paused again at the end of its new lifetime.
    await until(made.body.id, (current) => current.status === 'paused', 'the second timeout to pause the agent');
    const samples = parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text());
    expect(metricValue(samples, 'berth_agent_lifecycle_actions_total', { provider: 'local', action: 'timeout_pause' })).toBeGreaterThanOrEqual(2);
    await live.post(`/v1/agents/${made.body.id}/terminate`);
  });
});

describe('calls in flight hold an idle agent awake (leases)', () => {
  it('does not pause an agent under an exec that outlasts pauseAfter', async () => {
    const made = await create({ lifecycle: { idle: { pauseAfter: '2s' } } });
    await until(made.body.id, (current) => current.status === 'idle', 'the agent to be idle');
    const long = await exec(made.body.id, 'sleep 6; echo finished', { timeout: 30 });
    expect(long.status, JSON.stringify(long.body)).toBe(200);
    expect(long.body.stdout).toBe('finished\n');
    const { rows } = await db.query("SELECT count(*)::int AS n FROM events WHERE subject_id = $1 AND type = 'agent.paused'", [made.body.id]);
    expect(rows[0].n).toBe(0);
    // Idle once the call ended: paused then.
    await until(made.body.id, (current) => current.status === 'paused', 'the agent to be paused after the call');
    await live.post(`/v1/agents/${made.body.id}/terminate`);
  });

  it('calls off an idle pause decided before an exec began, right before the checkpoint: the exec keeps its sandbox', async () => {
    const made = await create({ lifecycle: { idle: { pauseAfter: '1h' } } });
    await until(made.body.id, (current) => current.status === 'idle', 'the agent to be idle');
    expect((await exec(made.body.id, 'echo 1 > /workspace/marker')).status).toBe(200);
    // The exec ends only when the test lets it (the file go), after the pause was called off: on a
    // loaded machine the reconcile may come later than any fixed sleep would last.
    const running = exec(made.body.id, 'touch /workspace/started; until [ -e /workspace/go ]; do sleep 0.05; done; cat /workspace/marker', { timeout: 90 });
    // The exec is in its sandbox when the idle pause arrives as the reconciler writes it after a look
    // at the traffic that came before the exec: its program runs (so the call read the agent again
    // after taking its lease; a pause seen then is a wake instead, not this case) and its lease is held.
    await eventually(async () => {
      const probe = await exec(made.body.id, 'test -e /workspace/started');
      return probe.status === 200 && probe.body.exitCode === 0 ? true : undefined;
    }, { what: 'the exec to run in its sandbox', intervalMs: 50 });
    await eventually(async () => {
      const { rows } = await db.query('SELECT count(*)::int AS n FROM agent_call_leases WHERE agent_id = $1', [made.body.id]);
      return rows[0].n > 0 ? true : undefined;
    }, { what: 'the exec to hold its lease', intervalMs: 20 });
    await db.query(
      `UPDATE resources SET spec = spec || '{"desiredState":"paused","pauseReason":"idle"}'::jsonb, generation = generation + 1, resource_version = nextval('resource_version_seq')
       WHERE kind = 'Agent' AND name = $1`,
      [made.body.id.replace('_', '-')],
    );
    await eventually(async () => {
      const { rows } = await db.query("SELECT spec->>'desiredState' AS state FROM resources WHERE kind = 'Agent' AND name = $1", [made.body.id.replace('_', '-')]);
      return rows[0].state === 'active' ? true : undefined;
    }, { what: 'the idle pause to be called off while the exec holds its lease', timeoutMs: 60_000, intervalMs: 20 });
    const go = await exec(made.body.id, 'touch /workspace/go');
    expect(go.status, JSON.stringify(go.body)).toBe(200);
    const answered = await running;
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    expect(answered.body.stdout).toBe('1\n');
    const current = await until(made.body.id, (agent) => agent.status === 'idle' && agent.pauseReason === undefined, 'the pause to be called off');
    expect(current.status).toBe('idle');
    const { rows } = await db.query("SELECT count(*)::int AS n FROM events WHERE subject_id = $1 AND type = 'agent.paused'", [made.body.id]);
    expect(rows[0].n).toBe(0);
    expect((await exec(made.body.id, 'cat /workspace/marker')).body.stdout).toBe('1\n');
    const samples = parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text());
    expect(metricValue(samples, 'berth_agent_lifecycle_actions_total', { provider: 'local', action: 'idle_pause_called_off' })).toBeGreaterThanOrEqual(1);
    await live.post(`/v1/agents/${made.body.id}/terminate`);
  });
});
