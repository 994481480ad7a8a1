/**
 * `make bench` (fork, ADR 45), on the local provider: time from `POST /v1/agents/{id}/fork` with
 * `count` N until every fork is idle, for an agent whose Python process holds 50 MiB of memory,
 * beside the floor of N agents created cold at once in the same run (until all are idle); and the
 * memory of each fork's sandbox (its memory cgroup) beside the source agent's own.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startBerth, tempDir } from '../helpers/berth.js';
import type { ApiClient } from '../helpers/http.js';
import { removeDataDir } from '../helpers/runsc.js';

const FORKS = Number(process.env.BENCH_FORKS ?? 10);
const MiB = 1024 * 1024;

const HOLD = `nohup python3 -c '
import os, time
block = os.urandom(50 * 1024 * 1024)
open("/workspace/ready", "w").write("ok")
while True:
    time.sleep(1)
' >/dev/null 2>&1 &
while [ ! -f /workspace/ready ]; do sleep 0.1; done; echo holding`;

/** The memory cgroup (v1) of a sandbox: everything it holds, and its anonymous memory alone. */
function cgroupMemory(containerId: string): { usage: number; rss: number } | undefined {
  const dir = `/sys/fs/cgroup/memory/berth/${containerId}`;
  if (!existsSync(dir)) return undefined;
  const stat = readFileSync(join(dir, 'memory.stat'), 'utf8');
  return { usage: Number(readFileSync(join(dir, 'memory.usage_in_bytes'), 'utf8')), rss: Number(/^total_rss (\d+)$/m.exec(stat)?.[1] ?? 0) };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function allIdle(api: ApiClient, ids: string[]): Promise<void> {
  const waiting = new Set(ids);
  const deadline = Date.now() + 600_000;
  while (waiting.size > 0) {
    for (const id of [...waiting]) {
      const agent = (await api.get(`/v1/agents/${id}`)).body;
      if (agent.status === 'idle') waiting.delete(id);
      else if (agent.status === 'failed') throw new Error(`agent ${id} failed: ${JSON.stringify(agent.error)}`);
    }
    if (Date.now() > deadline) throw new Error(`${waiting.size} agents not idle after 10 minutes`);
    if (waiting.size > 0) await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-fork-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn', BERTH_SANDBOX_MEMORY: '512Mi' } });
  const api = berth.api(berth.liveKey);
  const session = (await api.post('/v1/sessions', { userId: 'bench-fork' })).body.id;
  try {
    const source = (await api.post(`/v1/sessions/${session}/agents`, { timeout: '1h' })).body.id;
    await allIdle(api, [source]);
    const held = await api.post(`/v1/agents/${source}/exec`, { language: 'bash', code: HOLD });
    if (held.body.stdout !== 'holding\n') throw new Error(`could not fill memory: ${JSON.stringify(held.body)}`);

    // Floor: N agents created cold at once, until all are idle.
    const coldStarted = performance.now();
    const cold = await Promise.all(Array.from({ length: FORKS }, async () => (await api.post(`/v1/sessions/${session}/agents`, { timeout: '1h' })).body.id as string));
    await allIdle(api, cold);
    const coldMs = performance.now() - coldStarted;
    for (const id of cold) await api.post(`/v1/agents/${id}/terminate`);

    const forkStarted = performance.now();
    const forked = await api.post(`/v1/agents/${source}/fork`, { count: FORKS });
    if (forked.status !== 201) throw new Error(`fork: ${JSON.stringify(forked.body)}`);
    const answeredMs = performance.now() - forkStarted;
    const forks = (forked.body.agents as { id: string }[]).map((agent) => agent.id);
    await allIdle(api, forks);
    const forkMs = performance.now() - forkStarted;
    // Each fork's memory is measured once it ran a moment, as the source's.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const forkMemory = forks.map(cgroupMemory).filter((memory) => memory !== undefined);
    const sourceMemory = cgroupMemory(source);
    if (!sourceMemory || forkMemory.length === 0) throw new Error('no memory cgroup found for the sandboxes');

    const mib = (bytes: number) => (bytes / MiB).toFixed(1);
    console.log(`\nBerth fork (local provider, native), ${FORKS} forks of an agent holding 50 MiB in Python\n`);
    console.log(`${'measure'.padEnd(36)}${'value'.padStart(10)}   ${'floor'.padEnd(38)}${'value'.padStart(10)}${'ratio'.padStart(9)}`);
    console.log(`${`time to ${FORKS} forks idle (ms)`.padEnd(36)}${forkMs.toFixed(0).padStart(10)}   ${`${FORKS} agents created cold at once (ms)`.padEnd(38)}${coldMs.toFixed(0).padStart(10)}${`${(forkMs / coldMs).toFixed(2)}x`.padStart(9)}`);
    console.log(`${'  of which the fork answer (ms)'.padEnd(36)}${answeredMs.toFixed(0).padStart(10)}`);
    console.log(`${'memory per fork, cgroup (MiB)'.padEnd(36)}${mib(median(forkMemory.map((memory) => memory.usage))).padStart(10)}   ${'the source agent, cgroup (MiB)'.padEnd(38)}${mib(sourceMemory.usage).padStart(10)}${`${(median(forkMemory.map((memory) => memory.usage)) / sourceMemory.usage).toFixed(2)}x`.padStart(9)}`);
    console.log(`${'memory per fork, anonymous (MiB)'.padEnd(36)}${mib(median(forkMemory.map((memory) => memory.rss))).padStart(10)}   ${'the source agent, anonymous (MiB)'.padEnd(38)}${mib(sourceMemory.rss).padStart(10)}${`${(median(forkMemory.map((memory) => memory.rss)) / sourceMemory.rss).toFixed(2)}x`.padStart(9)}`);
    console.log('\nratio = Berth / floor. The fork answer includes the checkpoint of the source and its resume; each fork restores the same checkpoint.');
    for (const id of [source, ...forks]) await api.post(`/v1/agents/${id}/terminate`);
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

await main();
