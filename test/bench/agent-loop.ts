/**
 * `make bench` (agent loop): what the loop itself adds to each step (model call, tool call in
 * the sandbox, back to the model), against a floor measured in the same run: a raw HTTP
 * request to the same fake model, consuming its stream, plus a raw `runsc exec` of the same
 * command in the same sandbox.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { startBerth, tempDir } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeTurn } from '../helpers/fake-models.js';
import { removeDataDir } from '../helpers/runsc.js';
import { openSse } from '../helpers/sse.js';

const STEPS = Number(process.env.BENCH_LOOP_STEPS ?? 30);
const RUNS = Number(process.env.BENCH_LOOP_RUNS ?? 3);
/** What the loop may add to a step beyond the floor (the operator-core issue's goal). */
const TARGET_OVERHEAD_MS = 8;

const script = (body: any): FakeTurn => {
  const answers = body.messages.filter((message: any) => message.role === 'assistant').length;
  return answers < STEPS
    ? { text: 'step', toolCalls: [{ name: 'exec', input: { language: 'bash', code: 'true' } }], usage: { input: 100, output: 10 } }
    : { text: 'done', usage: { input: 100, output: 10 } };
};

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const model = await startFakeOpenAI(script);
  const dataDir = tempDir('berth-bench-loop-');
  const berth = await startBerth({
    dataDir,
    env: {
      BERTH_LOG_LEVEL: 'warn',
      BERTH_RUN_MAX_STEPS: String(STEPS + 1),
      BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }),
    },
  });
  const api = berth.api(berth.liveKey);
  try {
    const session = (await api.post('/v1/sessions', { userId: 'bench' })).body;
    const agent = (await api.post(`/v1/sessions/${session.id}/agents`, { tools: ['exec'] })).body;
    while ((await api.get(`/v1/agents/${agent.id}`)).body.status !== 'idle') await new Promise((resolve) => setTimeout(resolve, 20));

    const perStep: number[] = [];
    for (let run = 0; run < RUNS + 1; run++) {
      const stream = await openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream`, berth.liveKey);
      const started = performance.now();
      await api.post(`/v1/agents/${agent.id}/run`, { task: `bench ${run}` });
      await stream.waitFor((events) => events.some((event) => event.event === 'output'), 300_000);
      const elapsed = performance.now() - started;
      stream.close();
      if (run > 0) perStep.push(elapsed / (STEPS + 1)); // the first run warms up
      while ((await api.get(`/v1/agents/${agent.id}`)).body.status !== 'idle') await new Promise((resolve) => setTimeout(resolve, 20));
    }

    // Floor: the same model answer fetched directly, and the same command run by runsc directly.
    const body = { model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'floor' }] };
    const modelFloor: number[] = [];
    const execFloor: number[] = [];
    for (let i = 0; i < STEPS; i++) {
      const started = performance.now();
      const response = await fetch(`${model.baseUrl}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      await response.text();
      modelFloor.push(performance.now() - started);
      const execStarted = performance.now();
      spawnSync('runsc', [`--root=${join(dataDir, 'runsc')}`, 'exec', agent.id, 'timeout', '120', 'bash', '-c', 'true'], { stdio: 'ignore' });
      execFloor.push(performance.now() - execStarted);
    }
    const step = median(perStep);
    const floor = median(modelFloor) + median(execFloor);
    const overhead = step - floor;
    console.log(`\nBerth agent loop, ${STEPS} tool steps a run, ${RUNS} runs (median per step)\n`);
    console.log(`  per step (model call + exec tool + bookkeeping)   ${step.toFixed(1)} ms`);
    console.log(`  floor: raw model HTTP ${median(modelFloor).toFixed(1)} ms + raw runsc exec ${median(execFloor).toFixed(1)} ms = ${floor.toFixed(1)} ms`);
    console.log(`  loop overhead per step ${overhead.toFixed(1)} ms (target ≤ ${TARGET_OVERHEAD_MS} ms: ${overhead <= TARGET_OVERHEAD_MS ? 'met' : 'missed'}); step / floor ${(step / floor).toFixed(2)}x`);
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
    await model.close();
  }
}

await main();
