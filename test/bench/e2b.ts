/**
 * `make bench` (the E2B-compatible surface, ADR 44): the official JS SDK (`e2b`) against a real
 * `berth up`, beside the same operations through Berth's own API in the same run (the floors):
 *   create → first command   Sandbox.create() then commands.run('true')   |  POST session, POST agent ?waitFor=idle, POST /exec `true`
 *   commands.run('true')     on a ready sandbox (envd Start: a background process followed to its end)  |  POST /v1/agents/:id/exec `true`
 *   print → onStdout         a line's time printed in the sandbox (its clock is this host's) to its arrival at the SDK  |  the same through POST /exec/stream (SSE)
 */
import { Sandbox } from 'e2b';
import { startBerth, tempDir } from '../helpers/berth.js';
import type { ApiClient } from '../helpers/http.js';
import { removeDataDir } from '../helpers/runsc.js';
import { printFloorTable, runBench } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const CREATE_RUNS = Math.max(2, Math.ceil(RUNS / 4));
/** Lines printed per round of the output delay's measure, 50 ms apart. */
const PRINTS = Math.max(20, RUNS);
const PRINT_LOOP = `for i in $(seq ${PRINTS}); do date +%s%3N; sleep 0.05; done`;

/** The delay of each line of `text` (a millisecond time printed in the sandbox) from its print to now. */
function printDelays(text: string, into: number[]): void {
  const now = Date.now();
  for (const match of text.matchAll(/\b(\d{13})\b/g)) into.push(now - Number(match[1]));
}

/** The floor: the same lines through Berth's own streamed exec (SSE), read as they come. */
async function streamedPrintDelays(baseUrl: string, key: string, agentId: string, into: number[]): Promise<void> {
  const response = await fetch(`${baseUrl}/v1/agents/${agentId}/exec/stream`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ language: 'bash', code: PRINT_LOOP }),
  });
  if (!response.ok || !response.body) throw new Error(`exec/stream answered ${response.status}`);
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) printDelays(decoder.decode(chunk, { stream: true }), into);
}

async function berthCreateAndExec(api: ApiClient): Promise<{ ms: number; agentId: string }> {
  const started = performance.now();
  const session = (await api.post('/v1/sessions/by-user/bench-e2b-floor', {})).body;
  // The create answers once the agent is idle (?waitFor=idle): the fastest way Berth's own API has.
  const agent = (await api.post(`/v1/sessions/${session.id}/agents?waitFor=idle&waitSeconds=60`, { timeout: '10m' })).body;
  if (agent.status !== 'idle') throw new Error(`agent ${agent.id} is ${agent.status}, not idle`);
  const result = await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'true' });
  if (result.body.exitCode !== 0) throw new Error(`exec answered ${JSON.stringify(result.body)}`);
  return { ms: performance.now() - started, agentId: agent.id };
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-e2b-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  try {
    const api = berth.api(berth.liveKey);
    const sdk = { apiUrl: `${berth.baseUrl}/e2b`, sandboxUrl: berth.baseUrl, apiKey: `e2b_${berth.liveKey}` };

    const createFloor: number[] = [];
    const create: number[] = [];
    for (let i = 0; i < CREATE_RUNS + 1; i++) {
      const floor = await berthCreateAndExec(api);
      await api.post(`/v1/agents/${floor.agentId}/terminate`, {});
      const started = performance.now();
      const sandbox = await Sandbox.create({ ...sdk, timeoutMs: 600_000 });
      await sandbox.commands.run('true');
      const ms = performance.now() - started;
      await sandbox.kill();
      if (i === 0) continue; // the first of each warms the image and the code paths
      createFloor.push(floor.ms);
      create.push(ms);
    }

    const sandbox = await Sandbox.create({ ...sdk, timeoutMs: 600_000 });
    const agentId = `agt_${sandbox.sandboxId}`;
    const runFloor: number[] = [];
    const run: number[] = [];
    for (let i = 0; i < RUNS + 1; i++) {
      let started = performance.now();
      const result = await api.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'true' });
      if (result.body.exitCode !== 0) throw new Error(`exec answered ${JSON.stringify(result.body)}`);
      const floor = performance.now() - started;
      started = performance.now();
      await sandbox.commands.run('true');
      const ms = performance.now() - started;
      if (i === 0) continue;
      runFloor.push(floor);
      run.push(ms);
    }
    const printFloor: number[] = [];
    const print: number[] = [];
    for (let round = 0; round < 2; round++) {
      await streamedPrintDelays(berth.baseUrl, berth.liveKey!, agentId, printFloor);
      await sandbox.commands.run(PRINT_LOOP, { onStdout: (data) => printDelays(data, print) });
    }
    await sandbox.kill();

    printFloorTable(`E2B-compatible surface (e2b SDK, local provider): ${CREATE_RUNS} creates, ${RUNS} commands`, [
      { name: 'SDK create → first commands.run', samples: create, floorName: 'Berth API create → idle → exec', floor: createFloor },
      { name: "SDK commands.run('true')", samples: run, floorName: 'Berth API exec `true`', floor: runFloor },
      { name: 'SDK print → onStdout', samples: print, floorName: 'Berth API print → exec/stream event', floor: printFloor },
    ]);
    console.log(
      '\nratio = p50 / floor p50, the floor being the same operation through Berth\'s own API, measured in the same run.\n' +
        "A command through envd's Start is a background process (so that it outlives its stream) followed until it ends: a start, then its output and its end pushed by the launcher (ADR 50).",
    );
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

runBench(main);
