import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runBerth, startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { isRunning, removeDataDir, runscContainers } from '../helpers/runsc.js';

/**
 * Embedded mode end to end: the embedded PostgreSQL keeps everything in the data
 * directory, and sandboxes outlive the process that started them.
 */
const dataDir = tempDir('berth-restart-');
let berth: BerthProcess | undefined;

afterAll(async () => {
  await berth?.stop();
  removeDataDir(dataDir);
});

function postgresPid(): number | undefined {
  const pidFile = join(dataDir, 'postgres', 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  return isRunning(pid) ? pid : undefined;
}

async function waitForStatus(api: ApiClient, id: string, status: string, timeoutMs = 60_000) {
  return eventually(
    async () => {
      const agent = (await api.get(`/v1/agents/${id}`)).body;
      return agent.status === status ? agent : undefined;
    },
    { timeoutMs, what: `agent ${id} to be ${status}` },
  );
}

describe('berth up in embedded mode across restarts', () => {
  let liveKey: string;
  let testKey: string;
  let sessionId: string;
  let agentId: string;
  let shortLivedId: string;

  it('starts on a fresh data directory with an embedded PostgreSQL and prints two keys', async () => {
    berth = await startBerth({ dataDir });
    expect(berth.liveKey).toMatch(/^svc_live_[0-9A-Za-z]{40}$/);
    expect(berth.testKey).toMatch(/^svc_test_[0-9A-Za-z]{40}$/);
    liveKey = berth.liveKey!;
    testKey = berth.testKey!;
    expect(berth.stdout()).toContain(`embedded PostgreSQL in ${join(dataDir, 'postgres')}`);
    expect(postgresPid()).toBeDefined();
  });

  it('stores keys hashed, never in full', () => {
    // grep exits 1 when nothing matches: no file in the data directory holds the key.
    const search = spawnSync('grep', ['-rlF', liveKey.slice(9), dataDir], { encoding: 'utf8' });
    expect(search.stdout).toBe('');
    // 1: nothing matched. 2 only when files went away during the scan (a spare workspace volume
    // being made beside it is renamed into place), never for any other error.
    expect(search.status === 1 || search.stderr.split('\n').filter(Boolean).every((line) => line.endsWith('No such file or directory')), search.stderr).toBe(true);
  }, 30_000);

  it('runs an agent with files and a background process', async () => {
    const api = berth!.api(liveKey);
    sessionId = (await api.post('/v1/sessions/by-user/restarter', { metadata: { k: 'v' } })).body.id;
    agentId = (await api.post(`/v1/sessions/${sessionId}/agents`, { timeout: '1h' })).body.id;
    await waitForStatus(api, agentId, 'idle');
    const setup = await api.post(`/v1/agents/${agentId}/exec`, {
      language: 'bash',
      code: 'echo survived > /workspace/state.txt; (exec -a berth-marker sleep 3600 &); echo ok',
    });
    expect(setup.body).toMatchObject({ stdout: 'ok\n', exitCode: 0 });
  });

  it('stops cleanly on SIGTERM, leaving the sandbox running and no database server behind', async () => {
    expect(await berth!.stop('SIGTERM')).toBe(0);
    expect(berth!.stderr()).toContain('"msg":"stopped"');
    expect(postgresPid()).toBeUndefined();
    expect(existsSync(join(dataDir, 'berth.pid'))).toBe(false);
    expect(runscContainers(dataDir)).toContainEqual({ id: agentId, status: 'running' });
  });

  it('restarts with nothing lost: keys, sessions, the agent, its files and its processes', async () => {
    berth = await startBerth({ dataDir });
    expect(berth.liveKey).toBeUndefined();
    expect(berth.stdout()).not.toContain('First start');
    const api = berth.api(liveKey);
    const session = await api.post('/v1/sessions/by-user/restarter', {});
    expect(session.status).toBe(200);
    expect(session.body).toMatchObject({ id: sessionId, metadata: { k: 'v' } });
    const agent = (await api.get(`/v1/agents/${agentId}`)).body;
    expect(agent.status).toBe('idle');
    const check = await api.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'cat /workspace/state.txt; pgrep -f berth-marker >/dev/null && echo alive' });
    expect(check.body).toMatchObject({ stdout: 'survived\nalive\n', exitCode: 0 });
    expect((await berth.api(testKey).get('/v1/sessions')).status).toBe(200);
  });

  it('recovers from a crash (SIGKILL): the orphaned database is stopped and timeouts are still enforced', async () => {
    const api = berth!.api(liveKey);
    shortLivedId = (await api.post(`/v1/sessions/${sessionId}/agents`, { timeout: '6s' })).body.id;
    await waitForStatus(api, shortLivedId, 'idle');
    const orphan = postgresPid();
    expect(await berth!.stop('SIGKILL')).toBe(null);
    expect(postgresPid()).toBe(orphan);

    berth = await startBerth({ dataDir });
    expect(postgresPid()).not.toBe(orphan);
    const restarted = berth.api(liveKey);
    const failed = await waitForStatus(restarted, shortLivedId, 'failed', 30_000);
    expect(failed.error.code).toBe('timeout');
    expect(runscContainers(dataDir).map((container) => container.id)).not.toContain(shortLivedId);
    expect((await restarted.get(`/v1/agents/${agentId}`)).body.status).toBe('idle');
  });

  it('recreates a sandbox that vanished while Berth was down, keeping /workspace', async () => {
    expect(await berth!.stop('SIGTERM')).toBe(0);
    execFileSync('runsc', [`--root=${join(dataDir, 'runsc')}`, 'delete', '--force', agentId]);
    berth = await startBerth({ dataDir });
    const api = berth.api(liveKey);
    const agent = await eventually(
      async () => {
        const current = (await api.get(`/v1/agents/${agentId}`)).body;
        return current.conditions.some((condition: any) => condition.reason === 'SandboxLost') ? current : undefined;
      },
      { what: 'the sandbox to be recreated' },
    );
    expect(agent.status).toBe('idle');
    const check = await api.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'cat /workspace/state.txt' });
    expect(check.body.stdout).toBe('survived\n');
  });

  it('refuses a second berth up on the same data directory', async () => {
    const second = await runBerth(['up', '--port', '0', '--data-dir', dataDir]);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain('already running');
  });

  it('manages keys while berth up runs, and while it is stopped', async () => {
    const listed = await runBerth(['keys', 'list', '--data-dir', dataDir, '--log-level', 'warn']);
    expect(listed.code).toBe(0);
    expect(listed.stdout.match(/svc_(live|test)_/g)).toHaveLength(2);
    await berth!.api(liveKey).post(`/v1/agents/${agentId}/terminate`);
    expect(await berth!.stop()).toBe(0);
    const created = await runBerth(['keys', 'create', '--data-dir', dataDir, '--log-level', 'warn']);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/key: svc_live_/);
    expect(postgresPid()).toBeUndefined();
  });
});
