/**
 * `make bench` (warm pools and wake, ADR 45), on the local provider:
 * - agent create → idle with a warm claim (a pool of python sandboxes, refilled between runs),
 *   beside the floor of the same create → idle started cold, measured in the same run;
 * - exec `true` on an agent its idle policy paused (the exec waits for the wake: the resume from
 *   the checkpoint kept on the host), beside the floor of exec `true` on a running agent.
 * create → idle is timed from the POST until its answer, the POST sent with `?waitFor=idle` (the
 * server answers as soon as the reconciler writes the agent idle: no polling); the same with a POST
 * and then `GET /v1/agents/{id}?waitFor=idle`, and with GETs back to back (the client's poll), is
 * printed beside it.
 */
import { startBerth, tempDir } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { removeDataDir } from '../helpers/runsc.js';
import { percentile } from './floor-table.js';

const RUNS = Number(process.env.BENCH_WARM_RUNS ?? process.env.BENCH_RUNS ?? 30);
const WAKE_RUNS = Number(process.env.BENCH_WAKE_RUNS ?? Math.min(RUNS, 10));

type Wait = 'create' | 'get' | 'poll';

/**
 * Create, and wait until the agent is idle: the time, and the agent's id. `create`: the POST waits
 * (`?waitFor=idle`); `get`: a POST, then one GET that the server answers once the agent is idle;
 * `poll`: a POST, then GETs back to back.
 */
async function createToIdle(api: ApiClient, sessionId: string, body: Record<string, unknown> = {}, how: Wait = 'create'): Promise<{ ms: number; id: string; message: string }> {
  const started = performance.now();
  const created = await api.post(`/v1/sessions/${sessionId}/agents${how === 'create' ? '?waitFor=idle' : ''}`, { timeout: '1h', ...body });
  if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`);
  let agent = created.body;
  while (agent.status !== 'idle') {
    if (agent.status === 'failed') throw new Error(`agent failed: ${JSON.stringify(agent.error)}`);
    agent = (await api.get(`/v1/agents/${created.body.id}${how === 'poll' ? '' : '?waitFor=idle'}`)).body;
  }
  return { ms: performance.now() - started, id: agent.id, message: agent.conditions[0]?.message ?? '' };
}

async function execTrue(api: ApiClient, id: string): Promise<number> {
  const started = performance.now();
  const result = await api.post(`/v1/agents/${id}/exec`, { language: 'bash', code: 'true' });
  if (result.status !== 200) throw new Error(`exec: ${JSON.stringify(result.body)}`);
  return performance.now() - started;
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-warm-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  const api = berth.api(berth.liveKey);
  try {
    const sessionId = (await api.post('/v1/sessions', { userId: 'bench-warm' })).body.id;
    // Warm-up: the image and the first sandbox's caches.
    const first = await createToIdle(api, sessionId);
    await api.post(`/v1/agents/${first.id}/terminate`);

    const cold: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const { ms, id } = await createToIdle(api, sessionId);
      cold.push(ms);
      await api.post(`/v1/agents/${id}/terminate`);
    }
    process.stderr.write(`[bench] cold create → idle p50 ${percentile(cold, 50).toFixed(1)} ms; now warm\n`);

    const size = 2;
    const pool = (await api.post('/v1/warm-pools', { compute: 'python', size })).body;
    // Refilled: the pool's reconcile after the latest claim (its status counts the claim) has started the replacement.
    const refilled = (claims: number) =>
      eventually(
        async () => {
          const { ready, claims: counted } = (await api.get(`/v1/warm-pools/${pool.id}`)).body;
          return ready === size && counted >= claims ? true : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 20, what: 'the pool to refill' },
      );
    const warm: Record<Wait, number[]> = { create: [], get: [], poll: [] };
    const ways = Object.keys(warm) as Wait[];
    const roundTrip: number[] = [];
    for (let i = 0; i < ways.length * RUNS + 1; i++) {
      await refilled(i);
      // The three ways in turn, so that all see the same machine.
      const how = ways[i % ways.length]!;
      const { ms, id, message } = await createToIdle(api, sessionId, {}, how);
      if (!message.includes('warm pool')) throw new Error(`agent ${id} did not claim a warm sandbox: ${message}`);
      if (i > 0) warm[how].push(ms);
      // One GET of the agent: what a single round trip costs on this machine now.
      const before = performance.now();
      await api.get(`/v1/agents/${id}`);
      if (i > 0) roundTrip.push(performance.now() - before);
      await api.post(`/v1/agents/${id}/terminate`);
    }
    await api.raw(`/v1/warm-pools/${pool.id}`, { method: 'DELETE' });

    // Wake: an agent its idle policy pauses after 1 s without traffic; each exec wakes it.
    const sleeper = (await createToIdle(api, sessionId, { lifecycle: { idle: { pauseAfter: '1s' } } })).id;
    const running = (await createToIdle(api, sessionId)).id;
    const wake: number[] = [];
    const awake: number[] = [];
    for (let i = 0; i < WAKE_RUNS + 1; i++) {
      await eventually(async () => ((await api.get(`/v1/agents/${sleeper}`)).body.status === 'paused' ? true : undefined), {
        timeoutMs: 120_000,
        intervalMs: 20,
        what: 'the idle agent to be paused',
      });
      const woken = await execTrue(api, sleeper);
      const floor = await execTrue(api, running);
      if (i === 0) continue;
      wake.push(woken);
      awake.push(floor);
    }

    const line = (what: string, samples: number[], floorName: string, floor: number[]) =>
      `${what.padEnd(30)}${percentile(samples, 50).toFixed(1).padStart(8)}${percentile(samples, 95).toFixed(1).padStart(8)}   ${floorName.padEnd(30)}${percentile(floor, 50).toFixed(1).padStart(8)}${percentile(floor, 95).toFixed(1).padStart(8)}${`${(percentile(samples, 50) / percentile(floor, 50)).toFixed(2)}x`.padStart(9)}`;
    console.log(`\nBerth warm pools and wake (local provider), ${RUNS} creates each, ${WAKE_RUNS} wakes\n`);
    console.log(`${'measure'.padEnd(30)}${'p50 ms'.padStart(8)}${'p95 ms'.padStart(8)}   ${'floor'.padEnd(30)}${'p50 ms'.padStart(8)}${'p95 ms'.padStart(8)}${'ratio'.padStart(9)}`);
    console.log(line('create → idle, warm claim', warm.create, 'create → idle, cold (same run)', cold));
    console.log(line('  POST, then GET ?waitFor', warm.get, 'create → idle, cold (same run)', cold));
    console.log(line('  POST, then GETs polling', warm.poll, 'create → idle, cold (same run)', cold));
    console.log(line('create → idle, warm claim', warm.create, 'one GET of an agent (same run)', roundTrip));
    console.log(line('exec true, idle-paused agent', wake, 'exec true, running agent', awake));
    console.log(
      '\nratio = Berth p50 / floor p50. The warm claim target is p50 ≤ 10 ms (one POST ?waitFor=idle, answered when the\n' +
        'reconcile has written the agent idle, so one round trip and the reconcile are its floor on this machine; the next\n' +
        'two lines are the same create with a POST and then a waiting GET, or GETs back to back). The wake waits for the\n' +
        'resume from the checkpoint kept on the host (native: processes and memory), then runs the exec.',
    );
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

await main();
