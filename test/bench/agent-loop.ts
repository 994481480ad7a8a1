/**
 * `make bench` (agent loop): what the loop itself adds to each step (model call, tool call in
 * the sandbox, back to the model), against a floor measured in the same run:
 *
 *   floor        a raw HTTP request to the same fake model, consuming its stream, plus the exec
 *                tool call itself (bash `true`) as long as the loop's own event says it took: the
 *                provider's exec over the sandbox launcher's channel, which only the process that
 *                holds the channel can make (a second provider instance here would go through
 *                `runsc exec`). The loop's overhead is then what the loop adds, whatever an exec costs
 *   runsc floor  the model request plus a raw `runsc exec` of the command in the same sandbox:
 *                what the provider's exec adds beyond gVisor (a figure of the provider, printed
 *                for comparison)
 *
 * A step is the run's time divided by its model calls (STEPS tool steps and the final answer);
 * it includes the run's start and end (the artifacts scan, the cost, the last transaction).
 * Target: loop overhead (step p50 − floor) at most 8 ms. Also printed: the loop's own time a
 * step by its own clocks (the run's time less the model and tool calls as the runner's metrics
 * timed them), which needs no floor and so varies less with the machine's load.
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

/** The sum of a histogram's `_sum` series in Prometheus text, over all its labels. */
function histogramSum(metrics: string, name: string): number {
  return metrics
    .split('\n')
    .filter((line) => line.startsWith(`${name}_sum`))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

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

    // Floor: the same model answer fetched directly, and the same tool call by runsc (the tool call
    // through the provider is timed by the loop itself: `tool_result`'s durationMs). Its samples are
    // taken after each run, so that runs and floor see the same load of the machine.
    const body = { model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'floor' }] };
    const modelFloor: number[] = [];
    const runscFloor: number[] = [];
    const sampleFloor = async (): Promise<void> => {
      for (let i = 0; i < STEPS; i++) {
        const started = performance.now();
        const response = await fetch(`${model.baseUrl}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        await response.text();
        modelFloor.push(performance.now() - started);
        const runscStarted = performance.now();
        spawnSync('runsc', [`--root=${join(dataDir, 'runsc')}`, 'exec', agent.id, 'timeout', '120', 'bash', '-c', 'true'], { stdio: 'ignore' });
        runscFloor.push(performance.now() - runscStarted);
      }
    };

    const perStep: number[] = [];
    const toolCalls: number[] = [];
    const runEnds: number[] = [];
    /** Per run, a step's time outside its tool call and the run's end: the model call and the loop's own work. */
    const modelAndLoop: number[] = [];
    /** Per run, a step's time outside the model and tool calls as the loop timed them (its /metrics). */
    const ownTime: number[] = [];
    const callSeconds = async () => {
      const metrics = await (await fetch(`${berth.baseUrl}/metrics`)).text();
      return histogramSum(metrics, 'berth_runner_model_call_duration_seconds') + histogramSum(metrics, 'berth_runner_tool_call_duration_seconds');
    };
    for (let run = 0; run < RUNS + 1; run++) {
      const stream = await openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream`, berth.liveKey);
      const arrivals: number[] = [];
      const callsBefore = await callSeconds();
      const started = performance.now();
      await api.post(`/v1/agents/${agent.id}/run`, { task: `bench ${run}` });
      const events = await stream.waitFor((events) => {
        while (arrivals.length < events.length) arrivals.push(performance.now());
        return events.some((event) => event.event === 'output');
      }, 300_000);
      const elapsed = performance.now() - started;
      stream.close();
      if (run > 0) {
        // The first run warms up.
        perStep.push(elapsed / (STEPS + 1));
        const tools = events.filter((event) => event.event === 'tool_result').map((event) => event.data.durationMs as number);
        const toolTotal = tools.reduce((sum, ms) => sum + ms, 0);
        toolCalls.push(toolTotal / tools.length);
        // From the final answer's events to `output`: the artifacts scan, the cost, the last transaction.
        const output = events.findIndex((event) => event.event === 'output');
        const runEnd = arrivals[output]! - arrivals[output - 1]!;
        runEnds.push(runEnd);
        modelAndLoop.push((elapsed - toolTotal - runEnd) / (STEPS + 1));
        ownTime.push((elapsed - ((await callSeconds()) - callsBefore) * 1000) / (STEPS + 1));
      }
      while ((await api.get(`/v1/agents/${agent.id}`)).body.status !== 'idle') await new Promise((resolve) => setTimeout(resolve, 20));
      if (run > 0) await sampleFloor();
    }

    const step = median(perStep);
    // A run is STEPS + 1 model calls, STEPS tool calls, its end, and the loop's own work between them.
    const tool = median(toolCalls);
    const floor = median(modelFloor) + tool;
    const runscFloorMs = median(modelFloor) + median(runscFloor);
    const overhead = step - floor;
    const runEnd = median(runEnds);
    const bookkeeping = median(modelAndLoop) - median(modelFloor);
    console.log(`\nBerth agent loop, ${STEPS} tool steps a run, ${RUNS} runs (median per step)\n`);
    console.log(`  step p50 (model call + exec tool + bookkeeping)   ${step.toFixed(1)} ms`);
    console.log(`  floor: raw model HTTP ${median(modelFloor).toFixed(1)} ms + the exec tool call as the loop timed it ${tool.toFixed(1)} ms = ${floor.toFixed(1)} ms`);
    console.log(`  loop overhead per step ${overhead.toFixed(1)} ms (target ≤ ${TARGET_OVERHEAD_MS} ms: ${overhead <= TARGET_OVERHEAD_MS ? 'met' : 'missed'}); step / floor ${(step / floor).toFixed(2)}x`);
    console.log(`  runsc floor: raw model HTTP + raw runsc exec ${median(runscFloor).toFixed(1)} ms = ${runscFloorMs.toFixed(1)} ms; step / runsc floor ${(step / runscFloorMs).toFixed(2)}x`);
    console.log(`    exec tool as the loop timed it (mean) ${tool.toFixed(1)} ms: ${(tool - median(runscFloor)).toFixed(1)} ms over raw runsc exec`);
    console.log(`    run end (artifacts scan, cost, last transaction) ${runEnd.toFixed(1)} ms a run: ${(runEnd / (STEPS + 1)).toFixed(1)} ms a step`);
    console.log(`    the rest: loop bookkeeping (database writes, stop checks, model adapter beyond raw HTTP, run start) ${bookkeeping.toFixed(1)} ms a step`);
    console.log(
      `  the loop's own time a step, by its own clocks: the run as the client saw it less its model and tool calls as the loop timed them ${median(ownTime).toFixed(1)} ms (no floor: less noisy on a shared machine)`,
    );
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
    await model.close();
  }
}

await main();
