/**
 * `make bench` (triggers): how long a sender waits for a signed fire to be accepted, beside a
 * floor measured in the same run against the same `berth up`:
 *
 *   fire → 202     POST /triggers/:id/fire, signed (sealed secret opened, HMAC checked, job,
 *                  fire record and event written in one transaction)
 *   floor          GET /v1/triggers/:id with an API key (key lookup, one read of the trigger)
 *
 * The fires go to a trigger of the test key: their jobs run on the mock provider and model, so
 * the executor's work does not load the machine the way sandboxes would.
 */
import { createHmac } from 'node:crypto';
import { startBerth, tempDir } from '../helpers/berth.js';
import { removeDataDir } from '../helpers/runsc.js';
import { printFloorTable, runBench } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 30);

async function timed(run: () => Promise<{ status: number }>, expected: number): Promise<number> {
  const started = performance.now();
  const { status } = await run();
  const elapsed = performance.now() - started;
  if (status !== expected) throw new Error(`expected ${expected}, got ${status}`);
  return elapsed;
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-triggers-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  const api = berth.api(berth.testKey);
  try {
    await api.post('/v1/agent-definitions', { name: 'bench-bot' });
    const trigger = (await api.post('/v1/triggers', { agent: 'bench-bot', userId: 'bench', type: 'webhook' })).body;
    const path = new URL(trigger.url).pathname;
    const fire = (n: number) => {
      const body = JSON.stringify({ n, text: 'a ticket of the benchmark' });
      const signature = createHmac('sha256', trigger.secret).update(body).digest('hex');
      return berth.api(undefined).raw(path, { method: 'POST', headers: { 'content-type': 'application/json', 'x-trigger-signature': signature }, body });
    };
    const read = () => api.get(`/v1/triggers/${trigger.id}`);

    // Warm both paths, then alternate them so that the machine's noise falls on both alike.
    await timed(() => fire(-1), 202);
    await timed(read, 200);
    const fires: number[] = [];
    const reads: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      fires.push(await timed(() => fire(i), 202));
      reads.push(await timed(read, 200));
    }

    printFloorTable(`trigger fires, ${RUNS} runs (floor measured in the same run)`, [{ name: 'fire → 202', samples: fires, floorName: 'GET /v1/triggers/:id', floor: reads }]);
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

runBench(main);
