import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Fork with real gVisor sandboxes: ten forks of an agent whose process holds a value in memory
 * only continue from the same checkpoint (the same value, the counter going on from where it
 * was), then each goes its own way.
 */
let berth: BerthProcess;
let live: ApiClient;
let sessionId: string;

beforeAll(async () => {
  berth = await startBerth({ env: { DATABASE_URL: await createTestDatabase() } });
  live = berth.api(berth.liveKey);
  sessionId = (await live.post('/v1/sessions', { userId: 'forks' })).body.id;
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
});

function expectError(response: { status: number; body: any }, status: number, code: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error.code).toBe(code);
}

const exec = (id: string, code: string, extra: Record<string, unknown> = {}) => live.post(`/v1/agents/${id}/exec`, { language: 'bash', code, ...extra });

async function idle(id: string) {
  return eventually(async () => {
    const agent = (await live.get(`/v1/agents/${id}`)).body;
    if (agent.status === 'failed') throw new Error(`agent ${id} failed: ${JSON.stringify(agent.error)}`);
    return agent.status === 'idle' ? agent : undefined;
  }, { timeoutMs: 240_000, intervalMs: 200, what: `agent ${id} to be idle` });
}

/**
 * A process with a token in memory only (it writes it to /workspace/token when /workspace/ask
 * appears, never before) and a counter it writes every 100 ms.
 */
const HOLDER = `exec python3 -c '
import os, time
token = os.urandom(8).hex()
n = 0
while True:
    n += 1
    open("/workspace/count.tmp", "w").write(str(n))
    os.replace("/workspace/count.tmp", "/workspace/count")
    if os.path.exists("/workspace/ask"):
        os.remove("/workspace/ask")
        open("/workspace/token", "w").write(token)
    time.sleep(0.1)
'`;

const ASK_TOKEN = 'rm -f /workspace/token; touch /workspace/ask; while [ ! -s /workspace/token ]; do sleep 0.05; done; cat /workspace/token';

describe('fork', () => {
  let source: string;
  let forks: string[];
  let countAtFork: number;

  beforeAll(async () => {
    source = (await live.post(`/v1/sessions/${sessionId}/agents`, { timeout: '1h' })).body.id;
    await idle(source);
    expect((await exec(source, HOLDER, { background: true })).status).toBe(202);
    await eventually(async () => (Number((await exec(source, 'cat /workspace/count 2>/dev/null || echo 0')).body.stdout) > 3 ? true : undefined), { what: 'the counter to count' });
    expect((await exec(source, 'test -e /workspace/token && echo written || echo memory-only')).body.stdout).toBe('memory-only\n');
  });

  afterAll(async () => {
    for (const id of [source, ...(forks ?? [])]) await live.post(`/v1/agents/${id}/terminate`);
  });

  it('refuses a count out of range (422) and an agent that cannot be forked (409)', async () => {
    for (const body of [{ count: 0 }, { count: 101 }, { count: 2.5 }, { count: 'ten' }, { count: 1, deep: true }]) {
      expectError(await live.post(`/v1/agents/${source}/fork`, body), 422, 'unprocessable_entity');
    }
    const ended = (await live.post(`/v1/sessions/${sessionId}/agents`, { timeout: '10m' })).body.id;
    await idle(ended);
    await live.post(`/v1/agents/${ended}/terminate`);
    expectError(await live.post(`/v1/agents/${ended}/fork`, { count: 1 }), 409, 'conflict');
    expectError(await live.post('/v1/agents/agt_01m80gqvefwgc4tgw5batt7zt1/fork', { count: 1 }), 404, 'not_found');
  });

  it('makes ten agents from one native checkpoint and resumes the source from it', async () => {
    countAtFork = Number((await exec(source, 'cat /workspace/count')).body.stdout);
    const forked = await live.post(`/v1/agents/${source}/fork`, { count: 10 });
    expect(forked.status, JSON.stringify(forked.body)).toBe(201);
    expect(forked.body).toMatchObject({ agentId: source, snapshotId: expect.stringMatching(/^snap_/), level: 'native' });
    forks = forked.body.agents.map((agent: { id: string }) => agent.id);
    expect(forks).toHaveLength(10);
    expect(new Set(forks).size).toBe(10);
    expect((await live.get(`/v1/agents/${source}`)).body.status).toBe('idle');
    for (const id of forks) await idle(id);
  }, 300_000);

  it('gives every fork the memory of the checkpoint: the same token, the counter going on', async () => {
    const sourceToken = (await exec(source, ASK_TOKEN)).body.stdout;
    expect(sourceToken).toMatch(/^[0-9a-f]{16}$/);
    for (const id of forks) {
      const token = await exec(id, ASK_TOKEN);
      expect(token.body.stdout, id).toBe(sourceToken);
      const count = Number((await exec(id, 'cat /workspace/count')).body.stdout);
      expect(count, id).toBeGreaterThanOrEqual(countAtFork);
    }
  }, 120_000);

  it('lets each fork diverge: its own files and its own counter', async () => {
    for (const [index, id] of forks.entries()) expect((await exec(id, `echo fork-${index} > /workspace/me && echo ok`)).body.stdout).toBe('ok\n');
    for (const [index, id] of forks.entries()) expect((await exec(id, 'cat /workspace/me')).body.stdout).toBe(`fork-${index}\n`);
    expect((await exec(source, 'cat /workspace/me 2>/dev/null || echo none')).body.stdout).toBe('none\n');
    // Stopping one fork's counter leaves the others counting.
    expect((await exec(forks[0]!, "pkill -STOP -f 'count\\.tm[p]'; sleep 0.3; cat /workspace/count")).status).toBe(200);
    const frozen = Number((await exec(forks[0]!, 'cat /workspace/count')).body.stdout);
    const otherBefore = Number((await exec(forks[1]!, 'cat /workspace/count')).body.stdout);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(Number((await exec(forks[0]!, 'cat /workspace/count')).body.stdout)).toBe(frozen);
    expect(Number((await exec(forks[1]!, 'cat /workspace/count')).body.stdout)).toBeGreaterThan(otherBefore);
  }, 120_000);
});
