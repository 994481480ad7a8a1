/**
 * `make bench`: latency of the local provider as a user sees it, beside floors measured in
 * the same run on the same machine, so the ratios mean something whatever the hardware.
 *
 *   agent create → idle   POST /v1/sessions/:id/agents, then GET until idle   floor: runsc do /bin/true
 *   exec round trip       POST /v1/agents/:id/exec (bash `true`, python `pass`), against two floors:
 *                         the same program started inside the same sandbox by a program there
 *                         (spawn-floor.py: what any exec must cost at least), and a raw
 *                         `runsc exec` of it from the host (what a host process per exec costs)
 *   concurrent execs      4 execs of `sleep 0.2` at once on one agent         floor: one such exec
 *
 * Runs against a real `berth up` (embedded PostgreSQL, gVisor) in a temporary data directory.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startBerth, tempDir } from '../helpers/berth.js';
import { removeDataDir } from '../helpers/runsc.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 30);

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

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
function spawnFloor(runscRoot: string, sandbox: string, program: string[]): number[] {
  const source = readFileSync(new URL('./spawn-floor.py', import.meta.url), 'utf8');
  const output = execFileSync('runsc', [runscRoot, 'exec', sandbox, 'python3', '-I', '-c', source, String(RUNS), ...program], { encoding: 'utf8' });
  return JSON.parse(output) as number[];
}

function runscOk(args: string[]): void {
  const result = spawnSync('runsc', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  if (result.status !== 0) throw new Error(`runsc ${args.join(' ')} failed: ${result.stderr}`);
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

    // Agent create → idle, each agent terminated before the next so they do not pile up.
    const createToIdle: number[] = [];
    let warm: string | undefined;
    for (let i = 0; i < RUNS + 1; i++) {
      const started = performance.now();
      const agent = (await api.post(`/v1/sessions/${session.id}/agents`, { timeout: '10m' })).body;
      for (;;) {
        const current = (await api.get(`/v1/agents/${agent.id}`)).body;
        if (current.status === 'idle') break;
        if (current.status === 'failed') throw new Error(`agent failed: ${JSON.stringify(current.error)}`);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      const elapsed = performance.now() - started;
      if (i === 0) {
        warm = agent.id; // the first one only warms caches; it stays for the exec runs
        continue;
      }
      createToIdle.push(elapsed);
      await api.post(`/v1/agents/${agent.id}/terminate`);
    }

    // Floor 2: the same programs started inside the same sandbox, by a program there.
    const spawnBash = spawnFloor(runscRoot, warm!, ['bash', '-c', 'true']);
    const spawnPython = spawnFloor(runscRoot, warm!, ['python3', '-u', '-c', 'pass']);
    // Floor 3: a raw exec of them into the same sandbox from the host, bypassing Berth.
    runscOk([runscRoot, 'exec', warm!, 'bash', '-c', 'true']);
    const floorExec = Array.from({ length: RUNS }, () => timed(() => runscOk([runscRoot, 'exec', warm!, 'bash', '-c', 'true'])));

    const execBash: number[] = [];
    const execPython: number[] = [];
    await api.post(`/v1/agents/${warm}/exec`, { language: 'bash', code: 'true' });
    for (let i = 0; i < RUNS; i++) {
      execBash.push(await timedAsync(() => api.post(`/v1/agents/${warm}/exec`, { language: 'bash', code: 'true' })));
      execPython.push(await timedAsync(() => api.post(`/v1/agents/${warm}/exec`, { language: 'python', code: 'pass' })));
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
      ['exec bash `true`', execBash, 'in-sandbox spawn bash -c true', spawnBash],
      ['exec bash `true`', execBash, 'runsc exec bash -c true', floorExec],
      ['exec python `pass`', execPython, 'in-sandbox spawn python3 -c pass', spawnPython],
      ['exec python `pass`', execPython, 'runsc exec python3 -c pass', floorPython],
      ['4 execs `sleep 0.2` at once', fourSleeps, 'one exec `sleep 0.2`', oneSleep],
    ];
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
    console.log('\nratio = Berth / floor: what the API, database, controller and exec path add on top of gVisor itself.');
    console.log('Exec targets (ADR 20): p50 ≤ 1.2x the in-sandbox spawn floor; 4 execs at once ≈ one (1.0x), not 4x.');
    await api.post(`/v1/agents/${warm}/terminate`);
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

await main();
