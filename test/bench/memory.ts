/**
 * `make bench` (memory): what idle agents cost the host, beside a floor measured in the same run.
 *
 *   berth up, N idle agents   RSS of the berth process           floor: the same process with no agent
 *   per sandbox               its cgroup's memory (rss and all)  floor: an idle `runsc run` of the same image, without Berth
 *
 * N is BENCH_IDLE_AGENTS (default 100). Runs against a real `berth up` in a temporary data directory.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startBerth, tempDir } from '../helpers/berth.js';
import { removeDataDir } from '../helpers/runsc.js';

const AGENTS = Number(process.env.BENCH_IDLE_AGENTS ?? 100);
const CONCURRENCY = 8;
const MiB = 1024 * 1024;

function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/** The memory cgroup (v1) of a sandbox: everything it holds, and its anonymous memory alone. */
function cgroupMemory(containerId: string): { usage: number; rss: number } | undefined {
  const dir = `/sys/fs/cgroup/memory/berth/${containerId}`;
  if (!existsSync(dir)) return undefined;
  const stat = readFileSync(join(dir, 'memory.stat'), 'utf8');
  return {
    usage: Number(readFileSync(join(dir, 'memory.usage_in_bytes'), 'utf8')),
    rss: Number(/^total_rss (\d+)$/m.exec(stat)?.[1] ?? 0),
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-memory-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  const api = berth.api(berth.liveKey);
  try {
    const session = (await api.post('/v1/sessions', { userId: 'bench-memory' })).body;
    // One agent first, so that what every later one costs does not include first-use caches.
    const first = (await api.post(`/v1/sessions/${session.id}/agents`, { timeout: '1h' })).body;
    await idle(first.id);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const floorRss = rssBytes(berth.child.pid!);

    const ids: string[] = [first.id];
    for (let start = 1; start < AGENTS; start += CONCURRENCY) {
      const batch = Array.from({ length: Math.min(CONCURRENCY, AGENTS - start) }, async () => {
        const agent = (await api.post(`/v1/sessions/${session.id}/agents`, { timeout: '1h' })).body;
        await idle(agent.id);
        return agent.id as string;
      });
      ids.push(...(await Promise.all(batch)));
    }
    await new Promise((resolve) => setTimeout(resolve, 2000)); // let the reconciles and GC settle
    const rss = rssBytes(berth.child.pid!);
    const sandboxes = ids.map(cgroupMemory).filter((memory) => memory !== undefined);

    // Floor: the same kind of sandbox started by hand, idle, with nothing of Berth's inside.
    const floor = bareSandbox(dataDir);

    console.log(`\nBerth memory with ${ids.length} idle agents (local provider)\n`);
    console.log(`  berth up RSS                 ${mib(rss).padStart(11)}   floor: with one agent ${mib(floorRss)}; ${mib((rss - floorRss) / Math.max(1, ids.length - 1))} per further agent`);
    if (sandboxes.length > 0 && floor) {
      const usage = median(sandboxes.map((memory) => memory.usage));
      const anon = median(sandboxes.map((memory) => memory.rss));
      console.log(`  per sandbox, all (median)    ${mib(usage).padStart(11)}   floor: bare runsc sandbox ${mib(floor.usage)} (${(usage / floor.usage).toFixed(2)}x)`);
      console.log(`  per sandbox, anonymous       ${mib(anon).padStart(11)}   floor: bare runsc sandbox ${mib(floor.rss)} (${(anon / Math.max(1, floor.rss)).toFixed(2)}x)`);
    } else {
      console.log(`  per sandbox                  no memory cgroup found (cgroup v1 at /sys/fs/cgroup/memory is needed)`);
    }
    console.log(`\n"all" is the sandbox cgroup's usage (its processes, page cache and in-memory files); "anonymous" its rss alone.`);
    await Promise.all(ids.map((id) => api.post(`/v1/agents/${id}/terminate`)));
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }

  async function idle(id: string): Promise<void> {
    for (;;) {
      const agent = (await api.get(`/v1/agents/${id}`)).body;
      if (agent.status === 'idle') return;
      if (agent.status === 'failed') throw new Error(`agent ${id} failed: ${JSON.stringify(agent.error)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/**
 * An idle sandbox of the python image run by runsc directly, in a cgroup of its own: its bundle is a
 * copy of a Berth sandbox's config with the process replaced by `sleep`.
 */
function bareSandbox(dataDir: string): { usage: number; rss: number } | undefined {
  const runscRoot = join(dataDir, 'runsc');
  const sandboxes = join(dataDir, 'sandboxes');
  if (!existsSync(sandboxes)) return undefined;
  const template = spawnSync('sh', ['-c', `ls -d ${sandboxes}/*/bundle 2>/dev/null | head -1`], { encoding: 'utf8' }).stdout.trim();
  if (!template) return undefined;
  const bundle = tempDir('berth-bench-bare-');
  const config = JSON.parse(readFileSync(join(template, 'config.json'), 'utf8'));
  config.process.args = ['sleep', '3600'];
  config.mounts = config.mounts.filter((mount: { destination: string }) => ['/proc', '/dev', '/sys', '/tmp'].some((kept) => mount.destination.startsWith(kept)));
  const id = `bench-bare-${process.pid}`;
  config.linux.cgroupsPath = `/berth/${id}`;
  spawnSync('sh', ['-c', `cat > ${bundle}/config.json`], { input: JSON.stringify(config) });
  // The provider's flags: the sandbox's writes stay in its memory, never in the shared image.
  const flags = [`--root=${runscRoot}`, '--network=none', '--overlay2=root:memory,size=256m'];
  // A detached sandbox keeps the caller's output open: it gets a file, never a pipe.
  const log = join(bundle, 'runsc.log');
  const run = spawnSync('sh', ['-c', `runsc ${flags.join(' ')} run --detach --bundle ${bundle} ${id} >${log} 2>&1`], { stdio: 'ignore' });
  if (run.status !== 0) throw new Error(`runsc run of the floor sandbox failed: ${readFileSync(log, 'utf8')}`);
  spawnSync('sleep', ['2']);
  const memory = cgroupMemory(id);
  spawnSync('runsc', [`--root=${runscRoot}`, 'delete', '--force', id], { stdio: 'ignore' });
  rmSync(bundle, { recursive: true, force: true });
  return memory;
}

await main();
