/**
 * `make bench` (pause and resume): latency of POST /pause and POST /resume (each answers once
 * the agent is paused, or idle again) for an idle python sandbox and for one holding 200 MB of
 * memory, and how long after the pause request its snapshot's archive is stored, beside a floor
 * measured in the same run on the same sandbox: a raw `runsc checkpoint` and `runsc restore`,
 * without Berth's flush, archive, storage or bookkeeping; and for the pause a second floor, the
 * "durable checkpoint": `runsc checkpoint` followed by the flush a pause owes before it answers
 * (each image file and the image's directory fsync'd, the workspace's filesystem synced with
 * `sync -f`, issued together), which tells the disk's part of the gap from Berth's.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { startBerth, tempDir } from '../helpers/berth.js';
import type { ApiClient } from '../helpers/http.js';
import { flushDirectory, flushFile, syncFilesystem } from '../../providers/src/local/flush.js';
import { removeDataDir } from '../helpers/runsc.js';
import { percentile } from './floor-table.js';

const RUNS = Number(process.env.BENCH_PAUSE_RUNS ?? 10);

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

/**
 * Times one runsc command. Asynchronous on purpose: a synchronous spawn would stall this process's
 * event loop, and the HTTP client would then reuse a keep-alive connection the server has closed.
 */
async function runsc(args: string[]): Promise<number> {
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    // A detached restore keeps its stdio for the sandbox's lifetime: give it none of ours.
    const child = spawn('runsc', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 120_000 });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
    // A detached restore's sandbox inherits stderr: stop reading it once runsc itself has exited.
    child.on('error', reject);
    child.on('exit', (code) => {
      child.stderr!.destroy();
      if (code === 0) resolve();
      else reject(new Error(`runsc ${args.join(' ')} exited ${code}: ${stderr.trim()}`));
    });
  });
  return performance.now() - started;
}

/**
 * The durable checkpoint floor, timed as one figure: `runsc checkpoint`, then every file of the
 * image and the image's directory fsync'd and the workspace's filesystem written out (`sync -f` of
 * its loop mount), all issued at once. That is the least a pause that answers only once the
 * checkpoint is on the host's disk can do; what a pause takes beyond it is Berth's.
 */
async function durableCheckpoint(root: string, agentId: string, image: string, workspace: string): Promise<number> {
  const started = performance.now();
  await runsc([root, 'checkpoint', `--image-path=${image}`, agentId]);
  const entries = await readdir(image, { withFileTypes: true, recursive: true });
  await Promise.all([...entries.map((entry) => flushFile(join(entry.parentPath, entry.name))), flushDirectory(image), syncFilesystem(workspace)]);
  return performance.now() - started;
}

async function idleAgent(api: ApiClient): Promise<string> {
  const session = (await api.post('/v1/sessions', { userId: 'bench' })).body;
  const agent = (await api.post(`/v1/sessions/${session.id}/agents`, { timeout: '2h' })).body;
  while ((await api.get(`/v1/agents/${agent.id}`)).body.status !== 'idle') await new Promise((resolve) => setTimeout(resolve, 20));
  return agent.id;
}

/** Polls until the agent's newest snapshot is ready (its archive stored). */
async function readySnapshot(api: ApiClient, agentId: string): Promise<{ sizeBytes: number }> {
  for (;;) {
    const [snapshot] = (await api.get(`/v1/snapshots?agentId=${agentId}`)).body.data;
    if (snapshot?.state === 'ready') return snapshot;
    if (snapshot?.state === 'failed') throw new Error(`snapshot ${snapshot.id} failed`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const HOLD_MEMORY = `nohup python3 -c '
import time
block = bytearray(200 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
open("/workspace/ready", "w").write("ok")
while True:
    time.sleep(1)
' >/dev/null 2>&1 &
while [ ! -f /workspace/ready ]; do sleep 0.1; done; echo holding`;

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-pause-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn', BERTH_SANDBOX_MEMORY: '1Gi' } });
  const api = berth.api(berth.liveKey);
  const root = `--root=${join(dataDir, 'runsc')}`;
  const rows: string[] = [];
  try {
    for (const [label, setup] of [['idle python sandbox', ''], ['holding 200 MB', HOLD_MEMORY]] as const) {
      const agentId = await idleAgent(api);
      if (setup) {
        const result = await api.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: setup });
        if (result.body.stdout !== 'holding\n') throw new Error(`could not fill memory: ${JSON.stringify(result.body)}`);
      }
      const pause: number[] = [];
      const resume: number[] = [];
      const archived: number[] = [];
      let size = 0;
      for (let i = 0; i < RUNS + 1; i++) {
        const started = performance.now();
        const paused = await timed(() => api.post(`/v1/agents/${agentId}/pause`));
        // The pause answers once the checkpoint is on disk; the archive is stored after (ADR 21).
        const ready = await readySnapshot(api, agentId);
        const archiveReady = performance.now() - started;
        size = ready.sizeBytes;
        const resumed = await timed(() => api.post(`/v1/agents/${agentId}/resume`));
        if (i === 0) continue; // warm-up
        pause.push(paused);
        resume.push(resumed);
        archived.push(archiveReady);
      }
      // Floor: the same sandbox, checkpointed and restored by runsc alone. The agent is paused
      // first, so that Berth leaves its container alone (a sandbox that ends under a running
      // agent is recreated by its reconcile); runsc brings it back from the kept checkpoint.
      const sandboxDir = join(dataDir, 'sandboxes', agentId);
      const bundle = join(sandboxDir, 'bundle');
      const checkpointFloor: number[] = [];
      const durableFloor: number[] = [];
      const restoreFloor: number[] = [];
      process.stderr.write(`[bench] ${label}: pause ${percentile(pause, 50).toFixed(0)} ms, resume ${percentile(resume, 50).toFixed(0)} ms; now the runsc floor\n`);
      await api.post(`/v1/agents/${agentId}/pause`);
      await readySnapshot(api, agentId); // its archive would compete with the floor for the cores
      const kept = readdirSync(sandboxDir).find((name) => name.startsWith('kept-'));
      if (!kept) throw new Error(`no kept checkpoint in ${sandboxDir}`);
      await runsc([root, '--network=none', '--overlay2=root:memory', 'restore', '--detach', `--image-path=${join(sandboxDir, kept, 'checkpoint')}`, `--bundle=${bundle}`, agentId]);
      const restore = (image: string) => runsc([root, '--network=none', '--overlay2=root:memory', 'restore', '--detach', `--image-path=${image}`, `--bundle=${bundle}`, agentId]);
      // The two checkpoint floors in turn, so that both meet the same load.
      for (let i = 0; i < RUNS; i++) {
        const image = mkdtempSync(join(dataDir, 'floor-'));
        checkpointFloor.push(await runsc([root, 'checkpoint', `--image-path=${image}`, agentId]));
        await runsc([root, 'delete', '--force', agentId]);
        restoreFloor.push(await restore(image));
        rmSync(image, { recursive: true, force: true });
        const durableImage = mkdtempSync(join(dataDir, 'floor-'));
        durableFloor.push(await durableCheckpoint(root, agentId, durableImage, join(sandboxDir, 'workspace')));
        await runsc([root, 'delete', '--force', agentId]);
        await restore(durableImage);
        rmSync(durableImage, { recursive: true, force: true });
      }
      await runsc([root, 'delete', '--force', agentId]);
      const line = (what: string, samples: number[], floorName: string, floor: number[]) =>
        `${`${label}: ${what}`.padEnd(34)}${percentile(samples, 50).toFixed(0).padStart(8)}${percentile(samples, 95).toFixed(0).padStart(8)}   ${floorName.padEnd(20)}${percentile(floor, 50).toFixed(0).padStart(8)}${percentile(floor, 95).toFixed(0).padStart(8)}${`${(percentile(samples, 50) / percentile(floor, 50)).toFixed(2)}x`.padStart(9)}`;
      rows.push(line('pause', pause, 'runsc checkpoint', checkpointFloor));
      rows.push(line('pause', pause, 'durable checkpoint', durableFloor));
      rows.push(line('resume', resume, 'runsc restore', restoreFloor));
      rows.push(line('archive ready after', archived, 'runsc checkpoint', checkpointFloor));
      rows.push(`${''.padEnd(34)}snapshot archive: ${(size / 1024 / 1024).toFixed(1)} MiB`);
    }
    console.log(`\nBerth pause and resume (local provider, native), ${RUNS} runs each\n`);
    console.log(`${'measure'.padEnd(34)}${'p50 ms'.padStart(8)}${'p95 ms'.padStart(8)}   ${'floor'.padEnd(20)}${'p50 ms'.padStart(8)}${'p95 ms'.padStart(8)}${'ratio'.padStart(9)}`);
    for (const row of rows) console.log(row);
    console.log(
      '\nratio = Berth p50 / floor p50. pause: until the agent is paused (checkpoint flushed to disk, container deleted, bookkeeping);\n' +
        'durable checkpoint: runsc checkpoint, then its image files and directory fsync\'d and the workspace synced (sync -f), issued together;\n' +
        'archive ready after: from the pause request until its snapshot is ready (tar + zstd + SHA-256 into storage, after the pause answered);\n' +
        'resume: from the checkpoint kept on the host, once the archive is stored.',
    );
  } catch (error) {
    for (const dir of readdirSync(join(dataDir, 'sandboxes'), { withFileTypes: true }).filter((entry) => entry.isDirectory())) {
      const log = join(dataDir, 'sandboxes', dir.name, 'console.log');
      if (existsSync(log)) process.stderr.write(`console of ${dir.name}:\n${readFileSync(log, 'utf8').split('\n').slice(-15).join('\n')}\n`);
    }
    process.stderr.write(`berth output:\n${berth.stderr().split('\n').filter((line) => !line.includes('"level":"info"')).slice(-20).join('\n')}\n`);
    throw error;
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

await main();
