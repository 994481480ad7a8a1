import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { COUNTER_STATE, counterProgram, parseCounterState } from '../helpers/counter.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { checkpointedContainerGone, removeDataDir } from '../helpers/runsc.js';

/**
 * Pause by checkpoint and resume, through the API, with real runsc: a Python process keeps its
 * memory across pause and resume; snapshots resume as new agents, natively or by their files.
 */
let berth: BerthProcess;
let live: ApiClient;
let db: pg.Pool;

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({ env: { DATABASE_URL: databaseUrl } });
  live = berth.api(berth.liveKey);
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await db.end();
});

function expectError(response: { status: number; body: any }, status: number, code: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error.code).toBe(code);
}

async function idleAgent(client = live) {
  const session = (await client.post('/v1/sessions', { userId: 'pauser' })).body;
  const agent = (await client.post(`/v1/sessions/${session.id}/agents`, { timeout: '1h' })).body;
  await eventually(async () => ((await client.get(`/v1/agents/${agent.id}`)).body.status === 'idle' ? true : undefined));
  return { session, agent };
}

/** The agent's pause snapshot once its archive is stored (it is `creating` until then). */
async function archived(agentId: string, client = live) {
  return eventually(async () => {
    const [snapshot] = (await client.get(`/v1/snapshots?agentId=${agentId}`)).body.data;
    return snapshot?.state === 'ready' ? snapshot : undefined;
  }, { what: `the snapshot of ${agentId} to be archived` });
}

const exec = (id: string, code: string, language = 'bash') => live.post(`/v1/agents/${id}/exec`, { language, code });

const COUNTER = counterProgram();

async function counterState(id: string): Promise<{ pid: string; count: number; alive: boolean }> {
  return parseCounterState((await exec(id, COUNTER_STATE)).body.stdout);
}

describe('pause and resume of an agent', () => {
  let agent: any;
  let session: any;
  let snapshot: any;
  let before: { pid: string; count: number; alive: boolean };

  beforeAll(async () => {
    ({ agent, session } = await idleAgent());
    expect((await exec(agent.id, 'echo kept > /workspace/note.txt')).body.exitCode).toBe(0);
    expect((await exec(agent.id, COUNTER)).body.stdout).toBe('started\n');
    before = await counterState(agent.id);
    expect(before.alive).toBe(true);
  });

  it('checkpoints the sandbox into a pause snapshot, releases the compute, writes agent.paused, then archives it', async () => {
    const paused = await live.post(`/v1/agents/${agent.id}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ id: agent.id, status: 'paused' });
    await checkpointedContainerGone(berth.dataDir, agent.id);
    const list = (await live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ state: expect.stringMatching(/^(creating|ready)$/), level: 'native' });
    snapshot = await archived(agent.id);
    expect(snapshot).toEqual({
      id: expect.stringMatching(/^snap_[0-9a-z]{26}$/),
      agentId: agent.id,
      sessionId: session.id,
      provider: 'local',
      type: 'pause',
      sizeBytes: expect.any(Number),
      state: 'ready',
      level: 'native',
      createdAt: expect.any(String),
    });
    expect(snapshot.sizeBytes).toBeGreaterThan(10_000);
    expect((await live.get(`/v1/snapshots/${snapshot.id}`)).body).toEqual(snapshot);
    const archives = readdirSync(join(berth.dataDir, 'snapshots'));
    expect(archives).toContain(snapshot.id);
    const { rows } = await db.query("SELECT data FROM events WHERE subject_id = $1 AND type = 'agent.paused'", [agent.id]);
    expect(rows).toEqual([{ data: expect.objectContaining({ agentId: agent.id, sessionId: session.id, snapshotId: snapshot.id, level: 'native' }) }]);
    const { rows: storage } = await db.query('SELECT size_bytes FROM snapshot_storage WHERE snapshot_id = $1', [snapshot.id]);
    expect(Number(storage[0].size_bytes)).toBe(snapshot.sizeBytes);
  });

  it('refuses exec, run and a second pause while paused (409)', async () => {
    expectError(await exec(agent.id, 'true'), 409, 'conflict');
    expectError(await live.post(`/v1/agents/${agent.id}/run`, { task: 'x' }), 409, 'conflict');
    expectError(await live.post(`/v1/agents/${agent.id}/pause`), 409, 'conflict');
  });

  it('resumes natively: the same process continues with its memory, and the files are there', async () => {
    const resumed = await live.post(`/v1/agents/${agent.id}/resume`);
    expect(resumed.status).toBe(200);
    expect(resumed.body.status).toBe('idle');
    const after = await counterState(agent.id);
    expect(after.pid).toBe(before.pid);
    expect(after.alive).toBe(true);
    expect(after.count).toBeGreaterThanOrEqual(before.count);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const later = await counterState(agent.id);
    expect(later.count).toBeGreaterThan(after.count);
    expect((await exec(agent.id, 'cat /workspace/note.txt')).body.stdout).toBe('kept\n');
    expect((await live.get(`/v1/agents/${agent.id}`)).body.conditions[0]).toMatchObject({ reason: 'Restored' });
  });

  it('refuses to resume an agent that is not paused (409)', async () => {
    expectError(await live.post(`/v1/agents/${agent.id}/resume`), 409, 'conflict');
  });

  it('resumes the snapshot as a new agent natively, and by its files only on request', async () => {
    const native = await live.post(`/v1/snapshots/${snapshot.id}/resume`, {});
    expect(native.status).toBe(201);
    expect(native.body).toEqual({ agentId: expect.stringMatching(/^agt_/), provider: 'local', region: 'us-east-1', resumeLevel: 'native', status: 'booting' });
    await eventually(async () => ((await live.get(`/v1/agents/${native.body.agentId}`)).body.status === 'idle' ? true : undefined));
    expect((await counterState(native.body.agentId)).alive).toBe(true);

    const files = await live.post(`/v1/snapshots/${snapshot.id}/resume`, { region: 'eu-west-1', level: 'filesystem' });
    expect(files.body).toMatchObject({ resumeLevel: 'filesystem', region: 'eu-west-1' });
    await eventually(async () => ((await live.get(`/v1/agents/${files.body.agentId}`)).body.status === 'idle' ? true : undefined));
    expect((await exec(files.body.agentId, 'cat /workspace/note.txt')).body.stdout).toBe('kept\n');
    const state = await counterState(files.body.agentId);
    expect(state.alive).toBe(false); // files, not processes
    const newAgent = (await live.get(`/v1/agents/${files.body.agentId}`)).body;
    expect(newAgent).toMatchObject({ sessionId: session.id, compute: 'python', region: 'eu-west-1' });
  });

  it('refuses an unknown provider on resume (422)', async () => {
    expectError(await live.post(`/v1/snapshots/${snapshot.id}/resume`, { provider: 'elsewhere' }), 422, 'unprocessable_entity');
  });

  it("counts a snapshot resumed as a new agent against its session's maxAgents (402), creating nothing", async () => {
    const limited = (await live.post('/v1/sessions', { userId: 'one-agent', limits: { maxAgents: 1 } })).body;
    const only = (await live.post(`/v1/sessions/${limited.id}/agents`, { timeout: '10m' })).body;
    await eventually(async () => ((await live.get(`/v1/agents/${only.id}`)).body.status === 'idle' ? true : undefined));
    expect((await live.post(`/v1/agents/${only.id}/pause`)).body.status).toBe('paused');
    const paused = await archived(only.id);
    expectError(await live.post(`/v1/snapshots/${paused.id}/resume`, {}), 402, 'session_limit_exceeded');
    expect((await live.get(`/v1/sessions/${limited.id}/agents`)).body.data.map((agent: { id: string }) => agent.id)).toEqual([only.id]);
    await live.post(`/v1/agents/${only.id}/terminate`);
  });
});

/** The checkpoints kept on the host in the agent's sandbox directory (ADR 21). */
function keptCheckpoints(agentId: string): string[] {
  const dir = join(berth.dataDir, 'sandboxes', agentId);
  return existsSync(dir) ? readdirSync(dir).filter((name) => name.startsWith('kept-')) : [];
}

// 200 MB of random bytes held in memory: an archive that takes long enough to resume before it is stored.
const HOLD_RANDOM = `nohup python3 -c '
import os, time
block = os.urandom(200 * 1024 * 1024)
open("/workspace/holding", "w").write("ok")
while True:
    time.sleep(1)
' >/dev/null 2>&1 &
while [ ! -f /workspace/holding ]; do sleep 0.1; done; echo holding`;

describe('two-step pause: checkpoint on the host first, archive after', () => {
  it('resumes from a creating snapshot on the same host, and archives the workspace as it was paused', async () => {
    const { agent } = await idleAgent();
    expect((await exec(agent.id, 'echo paused > /workspace/state.txt')).body.exitCode).toBe(0);
    expect((await exec(agent.id, HOLD_RANDOM)).body.stdout).toBe('holding\n');
    expect((await exec(agent.id, COUNTER)).body.stdout).toBe('started\n');
    const before = await counterState(agent.id);

    expect((await live.post(`/v1/agents/${agent.id}/pause`)).body.status).toBe('paused');
    const [creating] = (await live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(creating).toMatchObject({ state: 'creating', level: 'native', sizeBytes: 0 });
    expectError(await live.post(`/v1/snapshots/${creating.id}/resume`, {}), 409, 'conflict');
    expectError(await live.raw(`/v1/snapshots/${creating.id}`, { method: 'DELETE' }), 409, 'conflict');

    const resumed = await live.post(`/v1/agents/${agent.id}/resume`);
    expect(resumed.body.status).toBe('idle');
    expect(await counterState(agent.id)).toMatchObject({ pid: before.pid, alive: true });
    expect((await exec(agent.id, 'echo resumed > /workspace/state.txt')).body.exitCode).toBe(0);

    const ready = await archived(agent.id);
    expect(ready.sizeBytes).toBeGreaterThan(100 * 1024 * 1024); // random memory does not compress
    const copy = await live.post(`/v1/snapshots/${ready.id}/resume`, {});
    expect(copy.body.resumeLevel).toBe('native');
    await eventually(async () => ((await live.get(`/v1/agents/${copy.body.agentId}`)).body.status === 'idle' ? true : undefined));
    expect((await exec(copy.body.agentId, 'cat /workspace/state.txt')).body.stdout).toBe('paused\n');
    expect((await counterState(copy.body.agentId)).alive).toBe(true);
    // Archived, and the agent was resumed from it: the kept checkpoint has no use left.
    await eventually(async () => (keptCheckpoints(agent.id).length === 0 ? true : undefined), { what: 'the kept checkpoint to be removed' });
    await live.post(`/v1/agents/${copy.body.agentId}/terminate`);
    await live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('resumes from the checkpoint kept on the host without reading the archive, then removes it', async () => {
    const { agent } = await idleAgent();
    await exec(agent.id, 'echo kept > /workspace/file.txt');
    await live.post(`/v1/agents/${agent.id}/pause`);
    const snapshot = await archived(agent.id);
    expect(keptCheckpoints(agent.id)).toHaveLength(1); // paused on it: a resume here still needs it
    const archive = join(berth.dataDir, 'snapshots', snapshot.id);
    const bytes = readFileSync(archive);
    bytes[Math.floor(bytes.length / 2)] ^= 0xff;
    writeFileSync(archive, bytes);

    expect((await live.post(`/v1/agents/${agent.id}/resume`)).body.status).toBe('idle');
    expect((await exec(agent.id, 'cat /workspace/file.txt')).body.stdout).toBe('kept\n');
    await eventually(async () => (keptCheckpoints(agent.id).length === 0 ? true : undefined), { what: 'the kept checkpoint to be removed' });
    // The archive was corrupt all along: a resume that must read it says so.
    const fromArchive = await live.post(`/v1/snapshots/${snapshot.id}/resume`, {});
    const failed = await eventually(async () => {
      const current = (await live.get(`/v1/agents/${fromArchive.body.agentId}`)).body;
      return current.status === 'failed' ? current : undefined;
    });
    expect(failed.error.code).toBe('snapshot_corrupted');
    await live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('removes the kept checkpoint with the agent when it is terminated while paused', async () => {
    const { agent } = await idleAgent();
    await live.post(`/v1/agents/${agent.id}/pause`);
    await archived(agent.id);
    expect(keptCheckpoints(agent.id)).toHaveLength(1);
    await live.post(`/v1/agents/${agent.id}/terminate`);
    expect(existsSync(join(berth.dataDir, 'sandboxes', agent.id))).toBe(false);
    await eventually(async () => ((await live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data.length === 0 ? true : undefined));
  });
});

describe('snapshot storage and integrity', () => {
  it('fails a resume from a corrupted archive with a clear error, and the snapshot stays', async () => {
    const { agent } = await idleAgent();
    await exec(agent.id, 'echo data > /workspace/file.txt');
    await live.post(`/v1/agents/${agent.id}/pause`);
    const snapshot = await archived(agent.id);
    const archive = join(berth.dataDir, 'snapshots', snapshot.id);
    const bytes = readFileSync(archive);
    bytes[Math.floor(bytes.length / 2)] ^= 0xff;
    writeFileSync(archive, bytes);
    const resumed = await live.post(`/v1/snapshots/${snapshot.id}/resume`, {});
    const failed = await eventually(async () => {
      const current = (await live.get(`/v1/agents/${resumed.body.agentId}`)).body;
      return current.status === 'failed' ? current : undefined;
    });
    expect(failed.error).toEqual({ code: 'snapshot_corrupted', message: expect.stringContaining('corrupted') });
    expect((await live.get(`/v1/snapshots/${snapshot.id}`)).body.state).toBe('ready');
  });

  it('deletes a snapshot: its archive goes and it can no longer be resumed', async () => {
    const { agent } = await idleAgent();
    await live.post(`/v1/agents/${agent.id}/pause`);
    const snapshot = await archived(agent.id);
    expect((await live.raw(`/v1/snapshots/${snapshot.id}`, { method: 'DELETE' })).body).toEqual({ ok: true });
    await eventually(async () => ((await live.get(`/v1/snapshots/${snapshot.id}`)).status === 404 ? true : undefined));
    expect(existsSync(join(berth.dataDir, 'snapshots', snapshot.id))).toBe(false);
    expectError(await live.post(`/v1/snapshots/${snapshot.id}/resume`, {}), 404, 'not_found');
    const { rows } = await db.query('SELECT deleted_at FROM snapshot_storage WHERE snapshot_id = $1', [snapshot.id]);
    expect(rows[0].deleted_at).toBeInstanceOf(Date);
  });

  it('deletes the snapshots of an agent that is terminated', async () => {
    const { agent } = await idleAgent();
    await live.post(`/v1/agents/${agent.id}/pause`);
    await live.post(`/v1/agents/${agent.id}/resume`);
    await live.post(`/v1/agents/${agent.id}/pause`);
    expect((await live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data).toHaveLength(2);
    await live.post(`/v1/agents/${agent.id}/terminate`);
    await eventually(async () => ((await live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data.length === 0 ? true : undefined));
  });
});

describe('snapshot routes', () => {
  it('lists newest first and filters by session, agent and state', async () => {
    const { agent, session } = await idleAgent();
    await live.post(`/v1/agents/${agent.id}/pause`);
    await live.post(`/v1/agents/${agent.id}/resume`);
    await live.post(`/v1/agents/${agent.id}/pause`);
    await eventually(async () => ((await live.get(`/v1/snapshots?sessionId=${session.id}&state=ready`)).body.data.length === 2 ? true : undefined));
    const bySession = (await live.get(`/v1/snapshots?sessionId=${session.id}`)).body.data;
    expect(bySession).toHaveLength(2);
    expect(Date.parse(bySession[0].createdAt)).toBeGreaterThanOrEqual(Date.parse(bySession[1].createdAt));
    expect((await live.get(`/v1/snapshots?sessionId=${session.id}&state=ready`)).body.data).toHaveLength(2);
    expect((await live.get(`/v1/snapshots?sessionId=${session.id}&state=creating`)).body.data).toHaveLength(0);
    expect((await live.get('/v1/snapshots')).body.data.length).toBeGreaterThanOrEqual(2);
  });

  it('answers 404 for unknown snapshots and agents, and 422 for bad filters', async () => {
    expectError(await live.get('/v1/snapshots/snap_0000000000000000000000000a'), 404, 'not_found');
    expectError(await live.post('/v1/snapshots/snap_0000000000000000000000000a/resume', {}), 404, 'not_found');
    expectError(await live.raw('/v1/snapshots/snap_0000000000000000000000000a', { method: 'DELETE' }), 404, 'not_found');
    expectError(await live.post('/v1/agents/agt_0000000000000000000000000a/pause'), 404, 'not_found');
    expectError(await live.post('/v1/agents/agt_0000000000000000000000000a/resume'), 404, 'not_found');
    expectError(await live.get('/v1/snapshots?state=gone'), 422, 'unprocessable_entity');
    expectError(await live.get('/v1/snapshots?agentId=nope'), 422, 'unprocessable_entity');
  });

  it('gives test keys the same pause, resume and snapshots without a sandbox', async () => {
    const test = berth.api(berth.testKey);
    const { agent } = await idleAgent(test);
    const paused = await test.post(`/v1/agents/${agent.id}/pause`);
    expect(paused.body.status).toBe('paused');
    const [snapshot] = (await test.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(snapshot).toMatchObject({ type: 'pause', state: 'ready', provider: 'local' });
    expect((await test.post(`/v1/agents/${agent.id}/resume`)).body.status).toBe('idle');
    expectError(await live.get(`/v1/snapshots/${snapshot.id}`), 404, 'not_found');
  });
});
