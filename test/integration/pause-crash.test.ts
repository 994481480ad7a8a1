import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { COUNTER_STATE, counterProgram, parseCounterState } from '../helpers/counter.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * A pause answers once the checkpoint is on the host's disk; the archive is made afterwards by the
 * Snapshot reconciler (ADR 21). Berth killed in between (SIGKILL, a real `berth up`) loses
 * nothing: the restarted process archives the kept checkpoint, and the agent resumes.
 */
let berth: BerthProcess;
let databaseUrl: string;
let db: pg.Pool;
let liveKey: string;
const dataDir = tempDir('berth-pause-crash-');
const env = () => ({ DATABASE_URL: databaseUrl, BERTH_SANDBOX_MEMORY: '1Gi' });

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({ dataDir, env: env() });
  liveKey = berth.liveKey!;
});
afterAll(async () => {
  await berth?.stop();
  removeDataDir(dataDir);
  await db.end();
});

// 300 MB held in memory: an archive that takes a while (random bytes do not compress).
const SETUP = counterProgram(300);

async function counter(api: ApiClient, agentId: string): Promise<{ pid: string; alive: boolean }> {
  const { pid, alive } = parseCounterState((await api.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: COUNTER_STATE })).body.stdout);
  return { pid, alive };
}

async function status(api: ApiClient, agentId: string, wanted: string) {
  return eventually(async () => {
    const agent = (await api.get(`/v1/agents/${agentId}`)).body;
    return agent.status === wanted ? agent : undefined;
  }, { what: `agent ${agentId} to be ${wanted}`, timeoutMs: 60_000 });
}

describe('berth killed between the checkpoint on disk and the archive', () => {
  it('finishes the archive after a restart, and the agent resumes with its processes', async () => {
    let api = berth.api(liveKey);
    const session = (await api.post('/v1/sessions', { userId: 'crash' })).body;
    const agent = (await api.post(`/v1/sessions/${session.id}/agents`, { timeout: '1h' })).body;
    await status(api, agent.id, 'idle');
    expect((await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'echo before-crash > /workspace/note.txt' })).body.exitCode).toBe(0);
    expect((await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: SETUP })).body.stdout).toBe('started\n');
    const before = await counter(api, agent.id);
    expect(before.alive).toBe(true);

    expect((await api.post(`/v1/agents/${agent.id}/pause`)).body.status).toBe('paused');
    const [snapshot] = (await api.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(snapshot.state).toBe('creating');
    expect(await berth.stop('SIGKILL')).toBe(null);
    // The checkpoint is in the sandbox's directory; the archive, if tar had begun, was never renamed into place.
    expect(readdirSync(join(dataDir, 'sandboxes', agent.id)).filter((name) => name.startsWith('kept-'))).toHaveLength(1);
    expect(existsSync(join(dataDir, 'snapshots', snapshot.id))).toBe(false);

    berth = await startBerth({ dataDir, env: env() });
    api = berth.api(liveKey);
    const ready = await eventually(async () => {
      const current = (await api.get(`/v1/snapshots/${snapshot.id}`)).body;
      return current.state === 'ready' ? current : undefined;
    }, { what: 'the snapshot to be archived after the restart', timeoutMs: 120_000 });
    expect(ready).toMatchObject({ level: 'native', agentId: agent.id });
    expect(ready.sizeBytes).toBeGreaterThan(200 * 1024 * 1024);
    expect(existsSync(join(dataDir, 'snapshots', snapshot.id))).toBe(true);
    const { rows } = await db.query('SELECT size_bytes FROM snapshot_storage WHERE snapshot_id = $1', [snapshot.id]);
    expect(Number(rows[0].size_bytes)).toBe(ready.sizeBytes);

    // The agent resumes (from the kept checkpoint), and a new agent from the archive made after the restart.
    expect((await api.post(`/v1/agents/${agent.id}/resume`)).body.status).toBe('idle');
    expect(await counter(api, agent.id)).toEqual({ pid: before.pid, alive: true });
    const copy = await api.post(`/v1/snapshots/${snapshot.id}/resume`, {});
    expect(copy.body.resumeLevel).toBe('native');
    await status(api, copy.body.agentId, 'idle');
    expect(await counter(api, copy.body.agentId)).toEqual({ pid: before.pid, alive: true });
    expect((await api.post(`/v1/agents/${copy.body.agentId}/exec`, { language: 'bash', code: 'cat /workspace/note.txt' })).body.stdout).toBe('before-crash\n');
    await api.post(`/v1/agents/${copy.body.agentId}/terminate`);
    await api.post(`/v1/agents/${agent.id}/terminate`);
  });
});
