import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteProviderConfig, putProviderConfig } from '../../common/src/index.js';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { checkpointedContainerGone, removeDataDir, runscContainers } from '../helpers/runsc.js';

/**
 * BYOI compute through the remote provider protocol: a second `berth up` (the "remote") runs
 * the sandboxes of the first one's organization, which registered it with PUT /v1/providers.
 * Both are real processes with real gVisor sandboxes; each has its own runsc state, so where a
 * sandbox runs is visible.
 */
const TOKEN = 'remote-provider-token-0123456789';
let home: BerthProcess;
let remote: BerthProcess;
let live: ApiClient;
let db: pg.Pool;
let sessionId: string;

const putProvider = (name: string, body: Record<string, unknown>) =>
  live.raw(`/v1/providers/${name}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

beforeAll(async () => {
  const [homeDb, remoteDb] = await Promise.all([createTestDatabase(), createTestDatabase()]);
  db = new pg.Pool({ connectionString: homeDb });
  [home, remote] = await Promise.all([
    // The remote install is on this host: loopback endpoints must be allowed.
    startBerth({ env: { DATABASE_URL: homeDb, BERTH_BYOI_ALLOW_HTTP: 'true', BERTH_BYOI_ALLOW_PRIVATE: 'true' } }),
    startBerth({ env: { DATABASE_URL: remoteDb, BERTH_PROVIDER_TOKENS: `other-token,${TOKEN}` } }),
  ]);
  live = home.api(home.liveKey);
  expect((await live.post('/v1/secrets', { REMOTE_TOKEN: TOKEN, WRONG_TOKEN: 'not-the-token' })).status).toBe(200);
  const put = await putProvider('remote', { credentialRef: 'REMOTE_TOKEN', config: { endpoint: `${remote.baseUrl}/provider/v1` } });
  expect(put.body).toEqual({ ok: true, provider: 'remote', mode: 'byoi' });
  sessionId = (await live.post('/v1/sessions', { userId: 'byoi' })).body.id;
});
afterAll(async () => {
  for (const berth of [home, remote]) {
    expect(await berth.stop()).toBe(0);
    removeDataDir(berth.dataDir);
  }
  await db.end();
});

const status = (id: string) => live.get(`/v1/agents/${id}`).then((response) => response.body);
const waitFor = (id: string, wanted: string) =>
  eventually(async () => ((await status(id)).status === wanted ? status(id) : undefined), { what: `agent ${id} ${wanted}`, timeoutMs: 60_000 });

describe('the remote provider protocol, served by another Berth', () => {
  let agentId: string;

  it('provisions the agent on the remote install, and execs there', async () => {
    const created = await live.post(`/v1/sessions/${sessionId}/agents`, { provider: 'remote', timeout: '30m' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    agentId = created.body.id;
    await waitFor(agentId, 'idle');
    expect(runscContainers(remote.dataDir).map((container) => container.id)).toContain(agentId);
    expect(runscContainers(home.dataDir).map((container) => container.id)).not.toContain(agentId);
    const result = await live.post(`/v1/agents/${agentId}/exec`, { language: 'python', code: 'import os; print(os.getcwd(), 6 * 7)' });
    expect(result.body).toMatchObject({ stdout: '/workspace 42\n', exitCode: 0 });
    const started = await db.query("SELECT data FROM events WHERE subject_id = $1 AND type = 'agent.started'", [agentId]);
    expect(started.rows[0].data).toMatchObject({ provider: 'remote' });
  });

  it('carries env, cwd and stdin to the remote, and answers 501 naming streaming or background processes it cannot carry yet', async () => {
    await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'mkdir -p sub' });
    const options = await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'echo "$A $(pwd) $(cat)"', env: { A: 'from-env' }, cwd: 'sub', stdin: 'from-stdin' });
    expect(options.status, JSON.stringify(options.body)).toBe(200);
    expect(options.body.stdout).toBe('from-env /workspace/sub from-stdin\n');
    const streamed = await live.post(`/v1/agents/${agentId}/exec/stream`, { language: 'bash', code: 'true' });
    expect(streamed.body.error).toMatchObject({ code: 'not_implemented', details: { field: 'stream' } });
    const background = await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'true', background: true });
    expect(background.body.error).toMatchObject({ code: 'not_implemented', details: { field: 'background' } });
    expect((await live.get(`/v1/agents/${agentId}/processes`)).body.error).toMatchObject({ code: 'not_implemented', details: { field: 'background' } });
    // The agent is unharmed: the spec's exec still works.
    expect((await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'echo fine' })).body.stdout).toBe('fine\n');
  });

  it('pauses it natively into this install\'s snapshot storage, and resumes it with its files and processes', async () => {
    await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'echo kept across the protocol > notes.txt' });
    // A background process, started through the launcher, with state in its memory.
    // Each count written whole, then renamed into place: a read never finds the file truncated and empty.
    const counter = `nohup python3 -c 'import itertools, os, time
for n in itertools.count():
    open("/workspace/count.next", "w").write(str(n)); os.replace("/workspace/count.next", "/workspace/count"); time.sleep(0.05)' >/dev/null 2>&1 & echo $! > /workspace/counter.pid`;
    await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: counter });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const pid = (await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'cat /workspace/counter.pid' })).body.stdout;
    const paused = await live.post(`/v1/agents/${agentId}/pause`);
    expect(paused.body.status).toBe('paused');
    await checkpointedContainerGone(remote.dataDir, agentId);
    const [snapshot] = (await live.get(`/v1/snapshots?agentId=${agentId}`)).body.data;
    expect(snapshot).toMatchObject({ provider: 'remote', state: 'ready', type: 'pause', level: 'native' });
    expect(snapshot.sizeBytes).toBeGreaterThan(0);

    const resumed = await live.post(`/v1/agents/${agentId}/resume`);
    expect(resumed.body.status).toBe('idle');
    expect(runscContainers(remote.dataDir).map((container) => container.id)).toContain(agentId);
    const read = await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'cat notes.txt' });
    expect(read.body.stdout).toBe('kept across the protocol\n');
    // Native: the same process carries on counting.
    const alive = await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: `kill -0 ${pid.trim()} && cat /workspace/count` });
    expect(alive.body.exitCode).toBe(0);
    const first = Number(alive.body.stdout);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const later = Number((await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'cat /workspace/count' })).body.stdout);
    expect(later).toBeGreaterThan(first);
  });

  it('terminates it on the remote install', async () => {
    await live.post(`/v1/agents/${agentId}/terminate`);
    expect((await status(agentId)).status).toBe('terminated');
    expect(runscContainers(remote.dataDir).map((container) => container.id)).not.toContain(agentId);
  });

  it("refuses a configuration of this install's own provider without an endpoint, and an agent on one stored before that was refused", async () => {
    const put = await putProvider('local', { credentialRef: 'REMOTE_TOKEN', config: { baseUrl: 'https://llm.example.com/v1' } });
    expect(put.status).toBe(422);
    expect(put.body.error.details.fields['config.endpoint'][0]).toContain('remote provider protocol');
    // Stored by an earlier Berth, which took it: every agent on local would have tried to start on it for good.
    const { rows } = await db.query('SELECT DISTINCT organization_id FROM api_keys');
    expect(rows).toHaveLength(1);
    const where = { organizationId: rows[0].organization_id as string, mode: 'live' as const };
    await putProviderConfig(db, where, { provider: 'local', credentialRef: 'REMOTE_TOKEN', config: { baseUrl: 'https://llm.example.com/v1' }, enabled: true }, new Date());
    try {
      const refused = await live.post(`/v1/sessions/${sessionId}/agents?waitFor=idle`, { timeout: '10m' });
      expect(refused.status, JSON.stringify(refused.body)).toBe(422);
      expect(refused.body.error.details.fields.provider[0]).toContain('config.endpoint');
      expect(refused.body.error.details.fields.provider[0]).toContain('DELETE /v1/providers/local');
    } finally {
      await deleteProviderConfig(db, where, 'local');
    }
    const created = await live.post(`/v1/sessions/${sessionId}/agents?waitFor=idle`, { timeout: '10m' });
    expect(created.body.status, JSON.stringify(created.body)).toBe('idle');
    await live.post(`/v1/agents/${created.body.id}/terminate`);
  });

  it('provisions on the fallback when the primary is unavailable, and says so', async () => {
    const down = await putProvider('down', { credentialRef: 'REMOTE_TOKEN', config: { endpoint: 'http://127.0.0.1:9/provider/v1' } });
    expect(down.status).toBe(200);
    const created = await live.post(`/v1/sessions/${sessionId}/agents`, { provider: 'down', providerFallback: 'local', timeout: '10m' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const agent = await waitFor(created.body.id, 'idle');
    expect(runscContainers(home.dataDir).map((container) => container.id)).toContain(created.body.id);
    expect(JSON.stringify(agent.conditions)).toContain('provider down is unavailable');
    const started = await db.query("SELECT data FROM events WHERE subject_id = $1 AND type = 'agent.started'", [created.body.id]);
    expect(started.rows[0].data).toMatchObject({ provider: 'local', fallbackFrom: 'down', fallbackReason: expect.stringContaining('unreachable') });
    expect((await live.post(`/v1/agents/${created.body.id}/exec`, { language: 'bash', code: 'echo on the fallback' })).body.stdout).toBe('on the fallback\n');
    await live.post(`/v1/agents/${created.body.id}/terminate`);
  });

  it('refuses a caller without the right token', async () => {
    const answer = await fetch(`${remote.baseUrl}/provider/v1/capabilities`, { headers: { authorization: 'Bearer not-the-token' } });
    expect(answer.status).toBe(401);
    expect(await answer.json()).toMatchObject({ error: { code: 'unauthorized' } });
    const ok = await fetch(`${remote.baseUrl}/provider/v1/capabilities`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(await ok.json()).toMatchObject({ protocol: 1, provider: 'local', capabilities: { computes: ['python', 'node', 'go'] } });
  });
});
