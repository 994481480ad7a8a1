/**
 * `make bench` (fleets): how many items a second a fleet gets through, beside a floor measured in
 * the same run against the same `berth up`:
 *
 *   fleet          a fleet of BENCH_FLEET_ITEMS items (default 1,000) at concurrency C (default 10):
 *                  items per second from its creation to its last item ended. Each item is a job:
 *                  an agent from the definition, the run, the agent ended.
 *   floor          agent create → idle → terminate, C at a time over the API, BENCH_FLEET_FLOOR
 *                  agents (default 100): agents per second. A fleet item does at least this much.
 *
 * Everything runs on the test key (mock provider and mock model): what is measured is Berth's own
 * work (reconciles, jobs, agents, runs), not sandboxes or a model.
 */
import { startBerth, tempDir } from '../helpers/berth.js';
import type { ApiClient } from '../helpers/http.js';
import { removeDataDir } from '../helpers/runsc.js';

const ITEMS = Number(process.env.BENCH_FLEET_ITEMS ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_FLEET_CONCURRENCY ?? 10);
const FLOOR_AGENTS = Number(process.env.BENCH_FLEET_FLOOR ?? 100);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 1_800_000, intervalMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Agents a second, `concurrency` at a time: create, wait until idle, terminate. */
async function agentCreateFloor(api: ApiClient, sessionId: string): Promise<number> {
  let next = 0;
  const worker = async () => {
    while (next < FLOOR_AGENTS) {
      next++;
      const created = await api.post(`/v1/sessions/${sessionId}/agents`, {});
      if (created.status !== 201) throw new Error(`agent create answered ${created.status}: ${JSON.stringify(created.body)}`);
      await until(async () => ((await api.get(`/v1/agents/${created.body.id}`)).body.status === 'idle' ? true : undefined), `agent ${created.body.id} idle`, 60_000);
      const ended = await api.post(`/v1/agents/${created.body.id}/terminate`, {});
      if (ended.status !== 200) throw new Error(`terminate answered ${ended.status}`);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return FLOOR_AGENTS / ((performance.now() - started) / 1000);
}

/** Items a second of one fleet of ITEMS items. */
async function fleetRate(api: ApiClient, sessionId: string): Promise<{ rate: number; fleet: any }> {
  const items = Array.from({ length: ITEMS }, (_, i) => ({ n: i, text: `item ${i} of the benchmark` }));
  const started = performance.now();
  const created = await api.post('/v1/fleets', { agent: 'bench-bot', sessionId, items, concurrency: CONCURRENCY });
  if (created.status !== 201) throw new Error(`fleet create answered ${created.status}: ${JSON.stringify(created.body)}`);
  const fleet = await until(
    async () => {
      const current = (await api.get(`/v1/fleets/${created.body.id}`)).body;
      return current.status !== 'running' ? current : undefined;
    },
    'the fleet to end',
    1_800_000,
    100,
  );
  const seconds = (performance.now() - started) / 1000;
  if (fleet.status !== 'completed' || fleet.completed !== ITEMS) throw new Error(`the fleet ended ${fleet.status} with ${fleet.completed} of ${ITEMS} completed`);
  return { rate: ITEMS / seconds, fleet };
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-fleet-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  const api = berth.api(berth.testKey);
  try {
    await api.post('/v1/agent-definitions', { name: 'bench-bot' });
    const sessionId = (await api.post('/v1/sessions', { userId: 'bench-fleet' })).body.id as string;
    // Floor first and fleet second, then the floor again: the machine's noise falls on both.
    const floorBefore = await agentCreateFloor(api, sessionId);
    const { rate } = await fleetRate(api, sessionId);
    const floorAfter = await agentCreateFloor(api, sessionId);
    const floor = (floorBefore + floorAfter) / 2;

    console.log(`\nfleet of ${ITEMS} items at concurrency ${CONCURRENCY}, test key (floor measured in the same run, ${FLOOR_AGENTS} agents twice)`);
    console.log(`${'measure'.padEnd(22)}${'per s'.padStart(9)}   ${'floor'.padEnd(36)}${'per s'.padStart(9)}${'ratio'.padStart(9)}`);
    console.log(
      `${'fleet items'.padEnd(22)}${rate.toFixed(1).padStart(9)}   ${`agent create → idle → end, ${CONCURRENCY} at once`.padEnd(36)}${floor.toFixed(1).padStart(9)}${`${(rate / floor).toFixed(2)}x`.padStart(9)}`,
    );
    console.log(`(floor before ${floorBefore.toFixed(1)}/s, after ${floorAfter.toFixed(1)}/s)`);
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
