/**
 * `make bench`: latency of the local provider as a user sees it, beside floors measured in
 * the same run on the same machine, so the ratios mean something whatever the hardware.
 *
 *   agent create → idle   POST /v1/sessions/:id/agents, then GET until idle   floor: runsc do /bin/true
 *                         (GETs back to back, the client's poll; and, alternating with it, one
 *                         GET ?waitFor=idle that the server answers when the agent is idle)
 *   create → first exec   the same, then POST /exec bash `true` answered: when the sandbox is of
 *                         use (its launcher up)                                floor: runsc do /bin/true
 *   exec round trip       POST /v1/agents/:id/exec (bash `true`, python `pass`), against two floors:
 *                         (back to back, as a tight loop sends them: alternating bash and python, and
 *                         one language only, as the spawn floor starts them; 100 ms apart, as an
 *                         agent's execs come between model calls; and by the cold path, spares off with the exec's
 *                         BERTH_SPARE_INTERPRETERS=0, ADR 56: the interpreter started on the request's path)
 *                         the same program started inside the same sandbox by a program there
 *                         (spawn-floor.py: what any exec must cost at least; in five rounds that
 *                         alternate with the execs), and a raw
 *                         `runsc exec` of it from the host (what a host process per exec costs)
 *   concurrent execs      4 execs of `sleep 0.2` at once on one agent         floor: one such exec
 *
 * Each agent is created after the one before is idle (and terminated): what one user waits for
 * on a quiet host. Target: create → idle at most 1.3x the floor at p50.
 *
 * Burst: BENCH_BURST agents (default 50) created at once in one session, p50 and p99 of create →
 * idle over the burst; floor: as many `runsc do /bin/true` started at once, p50 and p99 of each
 * one's start to exit. The agents are looked at in turn by one client (a GET at a time, so that
 * the looking does not take the CPU the starts need): an agent's time is when a sweep first
 * found it idle, so the figures are late by up to one sweep, whose median length is printed. The ratios say what Berth adds when sandboxes are asked for faster than the host
 * can start them: the API, the controller's queue (BERTH_CONTROLLER_WORKERS provisions at a
 * time), the database writes. Every agent of the burst is terminated, and gone, before the next
 * measure.
 *
 * Runs against a real `berth up` (embedded PostgreSQL, gVisor) in a temporary data directory.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startBerth, tempDir } from '../helpers/berth.js';
import type { ApiClient } from '../helpers/http.js';
import { removeDataDir } from '../helpers/runsc.js';
import { percentile } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 30);
const BURST = Number(process.env.BENCH_BURST ?? 50);

function timed(run: () => void): number {
  const started = performance.now();
  run();
  return performance.now() - started;
}

async function timedAsync(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}

function summary(samples: number[]) {
  return { p50: percentile(samples, 50), p95: percentile(samples, 95) };
}

/** Start-to-exit times of `program` spawned RUNS times by a program inside the sandbox (spawn-floor.py). */
function spawnFloor(runscRoot: string, sandbox: string, runs: number, program: string[]): number[] {
  const source = readFileSync(new URL('./spawn-floor.py', import.meta.url), 'utf8');
  const output = execFileSync('runsc', [runscRoot, 'exec', sandbox, 'python3', '-I', '-c', source, String(runs), ...program], { encoding: 'utf8' });
  return JSON.parse(output) as number[];
}

function runscOk(args: string[]): void {
  const result = spawnSync('runsc', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  if (result.status !== 0) throw new Error(`runsc ${args.join(' ')} failed: ${result.stderr}`);
}

/** `runsc do /bin/true`, started without waiting: resolves with its time from start to exit. */
function runscDo(): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn('runsc', ['--network=none', 'do', '/bin/true'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`runsc do /bin/true failed: ${stderr}`))));
  });
}

async function waitForStatus(api: ApiClient, agentId: string, wanted: string, pollMs: number): Promise<void> {
  for (;;) {
    const current = (await api.get(`/v1/agents/${agentId}`)).body;
    if (current.status === wanted) return;
    if (current.status === 'failed') throw new Error(`agent ${agentId} failed: ${JSON.stringify(current.error)}`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/**
 * BURST agents created at once: each one's create → idle, and the median length of a sweep (the
 * figures' resolution). All are terminated, and gone, before it returns.
 */
async function burstOfAgents(api: ApiClient, sessionId: string): Promise<{ times: number[]; sweepMs: number }> {
  const agentIds: string[] = [];
  try {
    const started = performance.now();
    const created = await Promise.all(
      Array.from({ length: BURST }, async () => {
        const response = await api.post(`/v1/sessions/${sessionId}/agents`, { timeout: '10m' });
        if (response.status !== 201) throw new Error(`creating an agent of the burst: ${response.status} ${JSON.stringify(response.body)}`);
        agentIds.push(response.body.id);
        return response.body.id as string;
      }),
    );
    const idleAt = new Map<string, number>();
    const sweeps: number[] = [];
    while (idleAt.size < created.length) {
      const sweepStarted = performance.now();
      for (const id of created) {
        if (idleAt.has(id)) continue;
        const current = (await api.get(`/v1/agents/${id}`)).body;
        if (current.status === 'failed') throw new Error(`agent ${id} failed: ${JSON.stringify(current.error)}`);
        if (current.status === 'idle') idleAt.set(id, performance.now() - started);
      }
      sweeps.push(performance.now() - sweepStarted);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    return { times: [...idleAt.values()], sweepMs: percentile(sweeps, 50) };
  } finally {
    await Promise.all(agentIds.map((id) => api.post(`/v1/agents/${id}/terminate`)));
    for (const id of agentIds) await waitForStatus(api, id, 'terminated', 50);
  }
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  const api = berth.api(berth.liveKey);
  const runscRoot = `--root=${join(dataDir, 'runsc')}`;
  try {
    const session = (await api.post('/v1/sessions', { userId: 'bench' })).body;

    // Floor 1: the cheapest complete gVisor sandbox, start to exit.
    runscOk(['--network=none', 'do', '/bin/true']);
    const floorSandbox = Array.from({ length: RUNS }, () => timed(() => runscOk(['--network=none', 'do', '/bin/true'])));

    // Agent create → idle, each agent terminated before the next so they do not pile up; polled
    // and waited for (?waitFor=idle) alternately, so that both see the same machine.
    const createToIdle: number[] = [];
    const createToIdleWaited: number[] = [];
    const createToExec: number[] = [];
    let warm: string | undefined;
    for (let i = 0; i < 2 * RUNS + 1; i++) {
      const waited = i % 2 === 0;
      const started = performance.now();
      const agent = (await api.post(`/v1/sessions/${session.id}/agents`, { timeout: '10m' })).body;
      for (;;) {
        const current = (await api.get(`/v1/agents/${agent.id}${waited ? '?waitFor=idle' : ''}`)).body;
        if (current.status === 'idle') break;
        if (current.status === 'failed') throw new Error(`agent failed: ${JSON.stringify(current.error)}`);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      const elapsed = performance.now() - started;
      if (i === 0) {
        warm = agent.id; // the first one only warms caches; it stays for the exec runs
        continue;
      }
      if (waited) {
        createToIdleWaited.push(elapsed);
        await api.post(`/v1/agents/${agent.id}/terminate`);
        continue;
      }
      createToIdle.push(elapsed);
      const exec = await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'true' });
      if (exec.status !== 200) throw new Error(`the first exec failed: ${exec.status} ${JSON.stringify(exec.body)}`);
      createToExec.push(performance.now() - started);
      await api.post(`/v1/agents/${agent.id}/terminate`);
    }

    // Floor 3: a raw exec of them into the same sandbox from the host, bypassing Berth.
    runscOk([runscRoot, 'exec', warm!, 'bash', '-c', 'true']);
    const floorExec = Array.from({ length: RUNS }, () => timed(() => runscOk([runscRoot, 'exec', warm!, 'bash', '-c', 'true'])));

    // Floor 2: the same programs started inside the same sandbox, by a program there, in rounds
    // that alternate with the execs, so that a slow stretch of the machine falls on both.
    const execBash: number[] = [];
    const execPython: number[] = [];
    const onlyBash: number[] = [];
    const onlyPython: number[] = [];
    const spacedBash: number[] = [];
    const spacedPython: number[] = [];
    const coldBash: number[] = [];
    const coldPython: number[] = [];
    const cold = { BERTH_SPARE_INTERPRETERS: '0' };
    const pause = () => new Promise((resolve) => setTimeout(resolve, 100));
    const spawnBash: number[] = [];
    const spawnPython: number[] = [];
    await api.post(`/v1/agents/${warm}/exec`, { language: 'bash', code: 'true' });
    const rounds = Math.min(RUNS, 5);
    for (let round = 0; round < rounds; round++) {
      const runs = Math.floor(RUNS / rounds) + (round < RUNS % rounds ? 1 : 0);
      spawnBash.push(...spawnFloor(runscRoot, warm!, runs, ['bash', '-c', 'true']));
      spawnPython.push(...spawnFloor(runscRoot, warm!, runs, ['python3', '-u', '-c', 'pass']));
      for (let i = 0; i < runs; i++) {
        execBash.push(await timedAsync(() => api.post(`/v1/agents/${warm}/exec`, { language: 'bash', code: 'true' })));
        execPython.push(await timedAsync(() => api.post(`/v1/agents/${warm}/exec`, { language: 'python', code: 'pass' })));
      }
      // One language at a time, as the spawn floor's loop: each loop led by one exec not timed, so
      // that the spare the other language's last exec started is not timed with the first.
      for (const [language, code, samples] of [['bash', 'true', onlyBash], ['python', 'pass', onlyPython]] as const) {
        await api.post(`/v1/agents/${warm}/exec`, { language, code });
        for (let i = 0; i < runs; i++) samples.push(await timedAsync(() => api.post(`/v1/agents/${warm}/exec`, { language, code })));
      }
      for (let i = 0; i < runs; i++) {
        await pause();
        spacedBash.push(await timedAsync(() => api.post(`/v1/agents/${warm}/exec`, { language: 'bash', code: 'true' })));
        await pause();
        spacedPython.push(await timedAsync(() => api.post(`/v1/agents/${warm}/exec`, { language: 'python', code: 'pass' })));
      }
      for (let i = 0; i < runs; i++) {
        coldBash.push(await timedAsync(() => api.post(`/v1/agents/${warm}/exec`, { language: 'bash', code: 'true', env: cold })));
        coldPython.push(await timedAsync(() => api.post(`/v1/agents/${warm}/exec`, { language: 'python', code: 'pass', env: cold })));
      }
    }
    const floorPython = Array.from({ length: RUNS }, () => timed(() => runscOk([runscRoot, 'exec', warm!, 'python3', '-u', '-c', 'pass'])));

    // Execs on one agent do not wait for each other: four sleeps of 0.2 s take about one.
    const sleep = () => api.post(`/v1/agents/${warm}/exec`, { language: 'bash', code: 'sleep 0.2' });
    const concurrentRuns = Math.max(2, Math.ceil(RUNS / 3));
    const oneSleep: number[] = [];
    const fourSleeps: number[] = [];
    for (let i = 0; i < concurrentRuns; i++) {
      oneSleep.push(await timedAsync(sleep));
      fourSleeps.push(await timedAsync(() => Promise.all([sleep(), sleep(), sleep(), sleep()])));
    }

    const rows: [string, number[], string, number[]][] = [
      ['agent create → idle', createToIdle, 'runsc do /bin/true', floorSandbox],
      ['  the same, ?waitFor=idle', createToIdleWaited, 'runsc do /bin/true', floorSandbox],
      ['agent create → first exec', createToExec, 'runsc do /bin/true', floorSandbox],
      ['exec bash `true`', execBash, 'in-sandbox spawn bash -c true', spawnBash],
      ['exec bash `true`', execBash, 'runsc exec bash -c true', floorExec],
      ['exec python `pass`', execPython, 'in-sandbox spawn python3 -c pass', spawnPython],
      ['exec python `pass`', execPython, 'runsc exec python3 -c pass', floorPython],
      ['exec bash, bash only', onlyBash, 'in-sandbox spawn bash -c true', spawnBash],
      ['exec python, python only', onlyPython, 'in-sandbox spawn python3 -c pass', spawnPython],
      ['exec bash, 100 ms apart', spacedBash, 'in-sandbox spawn bash -c true', spawnBash],
      ['exec python, 100 ms apart', spacedPython, 'in-sandbox spawn python3 -c pass', spawnPython],
      ['exec bash, cold path', coldBash, 'in-sandbox spawn bash -c true', spawnBash],
      ['exec python, cold path', coldPython, 'in-sandbox spawn python3 -c pass', spawnPython],
      ['4 execs `sleep 0.2` at once', fourSleeps, 'one exec `sleep 0.2`', oneSleep],
    ];
    // The burst: first the floor's, then Berth's.
    const burstFloor = await Promise.all(Array.from({ length: BURST }, () => runscDo()));
    const { times: burst, sweepMs } = await burstOfAgents(api, session.id);

    const cpu = execFileSync('nproc', { encoding: 'utf8' }).trim();
    console.log(`\nBerth local-provider latency, ${RUNS} runs each, ${cpu} CPUs, ${execFileSync('runsc', ['--version'], { encoding: 'utf8' }).split('\n')[0]}\n`);
    console.log(`${'measure'.padEnd(28)}${'p50 ms'.padStart(9)}${'p95 ms'.padStart(9)}   ${'floor'.padEnd(34)}${'p50 ms'.padStart(9)}${'p95 ms'.padStart(9)}${'p50 ratio'.padStart(11)}${'p95 ratio'.padStart(11)}`);
    for (const [name, samples, floorName, floor] of rows) {
      const s = summary(samples);
      const f = summary(floor);
      console.log(
        `${name.padEnd(28)}${s.p50.toFixed(1).padStart(9)}${s.p95.toFixed(1).padStart(9)}   ${floorName.padEnd(34)}${f.p50.toFixed(1).padStart(9)}${f.p95.toFixed(1).padStart(9)}${`${(s.p50 / f.p50).toFixed(2)}x`.padStart(11)}${`${(s.p95 / f.p95).toFixed(2)}x`.padStart(11)}`,
      );
    }
    const b = { p50: percentile(burst, 50), p99: percentile(burst, 99) };
    const bf = { p50: percentile(burstFloor, 50), p99: percentile(burstFloor, 99) };
    console.log(
      `\nburst of ${BURST} at once: agent create → idle p50 ${b.p50.toFixed(0)} ms, p99 ${b.p99.toFixed(0)} ms; ` +
        `floor ${BURST} × runsc do /bin/true p50 ${bf.p50.toFixed(0)} ms, p99 ${bf.p99.toFixed(0)} ms; ` +
        `p50 ratio ${(b.p50 / bf.p50).toFixed(2)}x, p99 ratio ${(b.p99 / bf.p99).toFixed(2)}x (one sweep of GETs: ${sweepMs.toFixed(0)} ms)`,
    );
    const createRatio = percentile(createToIdle, 50) / percentile(floorSandbox, 50);
    const waitedRatio = percentile(createToIdleWaited, 50) / percentile(floorSandbox, 50);
    console.log(
      `agent create → idle p50 / floor ${createRatio.toFixed(2)}x polled, ${waitedRatio.toFixed(2)}x waited for (target ≤ 1.3x: ${createRatio <= 1.3 ? 'met' : 'missed'} polled, ${waitedRatio <= 1.3 ? 'met' : 'missed'} waited for)`,
    );
    console.log('\nratio = Berth / floor: what the API, database, controller and exec path add on top of gVisor itself.');
    console.log('Exec targets (ADR 20): p50 ≤ 1.2x the in-sandbox spawn floor; 4 execs at once ≈ one (1.0x), not 4x.');
    await api.post(`/v1/agents/${warm}/terminate`);
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

await main();
