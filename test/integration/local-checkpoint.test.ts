import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxRef } from '../../crds/src/index.js';
import {
  ProviderError,
  type CheckpointResult,
  type ExecLanguage,
  type SnapshotLevel,
  type SnapshotStorage,
} from '../../common/src/index.js';
import { loadConfig } from '../../common/src/config.js';
import { createLogger } from '../../common/src/log.js';
import { createLocalProvider, type LocalProvider } from '../../providers/src/local/index.js';
import { DirectoryStorage } from '../../operator/src/snapshots/directory.js';
import { removeDataDir, runscContainers } from '../helpers/runsc.js';

// Holds a counter in memory and writes "<pid> <count> <memory check>" to /workspace/counter every
// 100 ms (written aside and renamed, so the host never reads half a line). It holds as many
// megabytes as its argument says too, one byte set in each page, and the check sums those bytes:
// it stays the page count as long as the memory is the process's own.
const COUNTER = `
import os, sys, time
megabytes = int(sys.argv[1])
memory = bytearray(megabytes * 1024 * 1024)
for page in range(0, len(memory), 4096):
    memory[page] = 1
count = 0
while True:
    count += 1
    with open('/workspace/counter.tmp', 'w') as file:
        file.write(f'{os.getpid()} {count} {sum(memory[::4096])}')
    os.replace('/workspace/counter.tmp', '/workspace/counter')
    time.sleep(0.1)
`;

const log = createLogger({ level: 'warn', name: 'local-checkpoint-test' });
let dataDir: string;
let provider: LocalProvider;
let storage: DirectoryStorage;

beforeAll(() => {
  const config = loadConfig({});
  dataDir = mkdtempSync(join(tmpdir(), 'berth-checkpoint-'));
  chmodSync(dataDir, 0o755);
  provider = createLocalProvider({ ...config, dataDir }, log);
  storage = new DirectoryStorage(join(dataDir, 'snapshots'));
});

afterAll(() => {
  if (dataDir) removeDataDir(dataDir);
});

const newAgentId = () => `agt_${randomBytes(6).toString('hex')}`;
const sandboxDir = (agentId: string) => join(dataDir, 'sandboxes', agentId);

/** An archive of the kept checkpoint, started: `stored`, or the message it failed with. */
function archiveOutcome(agentId: string, key: string): Promise<string> {
  return provider.archiveCheckpoint(agentId, { storage, key }).then(
    () => 'stored',
    (error: unknown) => (error as Error).message,
  );
}

type Restore = { level: SnapshotLevel; storage?: SnapshotStorage } & ({ archive: CheckpointResult } | { key: string });

function provision(agentId: string, restore?: Restore): Promise<SandboxRef> {
  return provider.provision({
    agentId,
    sessionId: 'ses_checkpoint',
    timeoutSeconds: 600,
    compute: 'python',
    browser: false,
    env: {},
    ...(restore
      ? {
          restore: {
            storage: restore.storage ?? storage,
            level: restore.level,
            ...('archive' in restore ? { key: restore.archive.key, archive: restore.archive } : { key: restore.key }),
          },
        }
      : {}),
  });
}

async function run(sandbox: SandboxRef, language: ExecLanguage, code: string): Promise<string> {
  const result = await provider.exec(sandbox, { language, code, timeoutMs: 30_000 });
  expect(result.exitCode, result.stderr).toBe(0);
  return result.stdout;
}

/** Starts the counter in the background, detached from the exec's output, as an agent would. */
async function startCounter(sandbox: SandboxRef, megabytes: number): Promise<void> {
  await run(sandbox, 'python', `open('/workspace/counter.py', 'w').write(${JSON.stringify(COUNTER)})`);
  await run(sandbox, 'bash', `nohup python3 /workspace/counter.py ${megabytes} >/dev/null 2>&1 </dev/null &`);
}

function readCounter(agentId: string): { pid: number; count: number; memoryCheck: number } | undefined {
  const file = join(sandboxDir(agentId), 'workspace', 'counter');
  if (!existsSync(file)) return undefined;
  const [pid, count, memoryCheck] = readFileSync(file, 'utf8').split(' ').map(Number);
  return { pid: pid!, count: count!, memoryCheck: memoryCheck! };
}

async function waitForCount(agentId: string, atLeast: number, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const counter = readCounter(agentId);
    if (counter && counter.count >= atLeast) return counter;
    if (Date.now() > deadline) throw new Error(`counter of ${agentId} is ${JSON.stringify(counter)}, waited for ${atLeast}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function runscKnows(agentId: string): boolean {
  return runscContainers(dataDir).some(({ id }) => id === agentId);
}

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: Math.round(performance.now() - started) };
}

describe('local sandboxes checkpointed into snapshot storage and restored', () => {
  const first = newAgentId();
  let native: CheckpointResult;
  let files: CheckpointResult;
  let pidBefore: number;

  it('checkpoint a running sandbox with its processes and memory, then release it', async () => {
    const sandbox = await provision(first);
    await run(sandbox, 'python', "open('/workspace/notes.txt', 'w').write('written before the checkpoint')");
    // Outside /workspace: only in the sandbox's in-memory root overlay.
    await run(sandbox, 'bash', "echo 'kept in memory' > /root/overlay.txt");
    await startCounter(sandbox, 1);
    pidBefore = (await waitForCount(first, 5)).pid;

    native = await provider.checkpoint(sandbox, { storage, key: `agents/${first}/native.tar.zst`, native: true });

    expect(native.level).toBe('native');
    expect(native.sizeBytes).toBeGreaterThan(0);
    expect(statSync(storage.pathOf(native.key)).size).toBe(native.sizeBytes);
    expect(runscKnows(first)).toBe(false);
    expect(existsSync(sandboxDir(first))).toBe(false);
  });

  it('restore it natively as the same agent: the same process keeps counting from where it was', async () => {
    const sandbox = await provision(first, { archive: native, level: 'native' });

    const restored = readCounter(first)!;
    expect(restored.pid).toBe(pidBefore);
    const later = await waitForCount(first, restored.count + 10);
    expect(later.pid).toBe(pidBefore);
    expect(await run(sandbox, 'bash', `ps -o pid= -p ${pidBefore}`)).toMatch(String(pidBefore));
    expect(await run(sandbox, 'bash', 'cat /workspace/notes.txt')).toBe('written before the checkpoint');
    expect(await run(sandbox, 'bash', 'cat /root/overlay.txt')).toBe('kept in memory\n');
  });

  it('checkpoint the files only, and restore them into a new agent without the old processes', async () => {
    const sandbox: SandboxRef = { provider: 'local', id: first };
    files = await provider.checkpoint(sandbox, { storage, key: `agents/${first}/files.tar.zst`, native: false });
    expect(files.level).toBe('filesystem');
    expect(runscKnows(first)).toBe(false);

    const second = newAgentId();
    const copy = await provision(second, { archive: files, level: 'filesystem' });
    expect(await run(copy, 'bash', 'cat /workspace/notes.txt')).toBe('written before the checkpoint');
    const frozen = readCounter(second)!;
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(readCounter(second)).toEqual(frozen);
    expect(await run(copy, 'bash', 'pgrep -f counter.py || echo none')).toBe('none\n');
    expect(await run(copy, 'bash', 'cat /root/overlay.txt 2>&1 || true')).toMatch(/No such file/);
    await provider.terminate(copy);
  });

  it('fail a restore whose storage read failed as worth a retry, and succeed on the retry', async () => {
    let failures = 1;
    const flaky: SnapshotStorage = {
      kind: 'directory',
      put: (key, body) => storage.put(key, body),
      get: async (key) => {
        if (failures-- > 0) throw new Error('connection reset by peer');
        return storage.get(key);
      },
      delete: (key) => storage.delete(key),
      exists: (key) => storage.exists(key),
    };
    const third = newAgentId();
    const error = await provision(third, { archive: files, level: 'filesystem', storage: flaky }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).message).toMatch(/could not read snapshot archive .*connection reset by peer/);
    expect((error as ProviderError).details.corrupted).toBeUndefined();
    expect(existsSync(sandboxDir(third))).toBe(false);

    const sandbox = await provision(third, { archive: files, level: 'filesystem', storage: flaky });
    expect(await run(sandbox, 'bash', 'cat /workspace/notes.txt')).toBe('written before the checkpoint');
    await provider.terminate(sandbox);
  });

  it('refuse a corrupted archive clearly, leaving nothing running and no scratch behind', async () => {
    const file = openSync(storage.pathOf(files.key), 'r+');
    const byte = Buffer.alloc(1);
    const offset = Math.floor(files.sizeBytes / 2);
    readSync(file, byte, 0, 1, offset);
    writeSync(file, Buffer.from([byte[0]! ^ 0xff]), 0, 1, offset);
    closeSync(file);

    const fourth = newAgentId();
    const error = await provision(fourth, { archive: files, level: 'filesystem' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).message).toMatch(/snapshot archive .* is corrupted/);
    expect((error as ProviderError).details.corrupted).toBe(true);
    expect(runscKnows(fourth)).toBe(false);
    expect(existsSync(sandboxDir(fourth))).toBe(false);
  });

  it('finish a checkpoint cut short after the sandbox was frozen, and take a stored archive as done', async () => {
    const agentId = newAgentId();
    const sandbox = await provision(agentId);
    await startCounter(sandbox, 1);
    const before = await waitForCount(agentId, 3);
    const down: SnapshotStorage = {
      kind: 'directory',
      put: async (_key, body) => {
        body.destroy();
        throw new Error('storage is down');
      },
      get: (key) => storage.get(key),
      delete: (key) => storage.delete(key),
      exists: (key) => storage.exists(key),
    };
    const target = { key: `agents/${agentId}/native.tar.zst`, native: true };

    await expect(provider.checkpoint(sandbox, { ...target, storage: down })).rejects.toThrow(/storage is down/);
    expect(runscKnows(agentId)).toBe(false); // frozen: its processes are in the checkpoint image
    const done = await provider.checkpoint(sandbox, { ...target, storage });
    expect(done.level).toBe('native');
    expect(existsSync(sandboxDir(agentId))).toBe(false);
    expect(await provider.checkpoint(sandbox, { ...target, storage })).toEqual(done);

    await provision(agentId, { archive: done, level: 'native' });
    const after = await waitForCount(agentId, before.count + 5);
    expect(after.pid).toBe(before.pid);
    await provider.terminate(sandbox);
  });

  it('keep a checkpoint on disk, restore from it before its archive exists, and archive it as it was paused', async () => {
    const agentId = newAgentId();
    const sandbox = await provision(agentId);
    await run(sandbox, 'bash', 'echo before > /workspace/state.txt');
    await startCounter(sandbox, 1);
    const before = await waitForCount(agentId, 3);
    const key = `agents/${agentId}/kept.tar.zst`;

    expect(await provider.checkpointLocally(sandbox, { key, native: true })).toEqual({ level: 'native' });
    // The stopped container's record is deleted in the background once the checkpoint is safe.
    await expect.poll(() => runscKnows(agentId), { timeout: 15_000 }).toBe(false);
    const kept = readdirSync(sandboxDir(agentId)).filter((name) => name.startsWith('kept-'));
    expect(kept).toHaveLength(1);
    expect(statSync(join(sandboxDir(agentId), kept[0]!)).mode & 0o777).toBe(0o700);
    expect(await provider.checkpointLocally(sandbox, { key, native: true })).toEqual({ level: 'native' }); // taken as done
    expect(await storage.exists(key)).toBe(false);

    // No archive: the kept checkpoint is the only source, and the process comes back from it.
    const restored = await provision(agentId, { key, level: 'native' });
    expect((await waitForCount(agentId, before.count + 5)).pid).toBe(before.pid);
    await run(restored, 'bash', 'echo after > /workspace/state.txt');

    // The archive made now holds the workspace as it was paused, not as the restored sandbox changed it.
    const archived = await provider.archiveCheckpoint(agentId, { storage, key });
    expect(archived.level).toBe('native');
    expect(await provider.archiveCheckpoint(agentId, { storage, key })).toEqual(archived);
    const copy = newAgentId();
    const fromArchive = await provision(copy, { archive: archived, level: 'native' });
    expect(await run(fromArchive, 'bash', 'cat /workspace/state.txt')).toBe('before\n');
    expect((await waitForCount(copy, 1)).pid).toBe(before.pid);
    await provider.terminate(fromArchive);

    expect(await provider.discardCheckpoint(agentId, key)).toBe(true);
    expect(await provider.discardCheckpoint(agentId, key)).toBe(false);
    expect(readdirSync(sandboxDir(agentId)).filter((name) => name.startsWith('kept-'))).toEqual([]);
    await provider.terminate(restored);
  });

  it('cancel an archive in progress when the sandbox is restored from its kept checkpoint, and archive the paused workspace after', async () => {
    const agentId = newAgentId();
    const sandbox = await provision(agentId);
    // 64 MB of random files: the archive is still being made when the restore comes.
    await run(sandbox, 'bash', 'head -c 67108864 /dev/urandom > /workspace/random.bin && echo paused > /workspace/state.txt');
    const key = `agents/${agentId}/race.tar.zst`;
    await provider.checkpointLocally(sandbox, { key, native: true });

    const archiving = archiveOutcome(agentId, key);
    const restored = await provision(agentId, { key, level: 'native' });
    await run(restored, 'bash', 'echo resumed > /workspace/state.txt && rm /workspace/random.bin');
    expect(await archiving).toMatch(/stored|cancelled/);

    const archived = await provider.archiveCheckpoint(agentId, { storage, key });
    const copy = newAgentId();
    const fromArchive = await provision(copy, { archive: archived, level: 'filesystem' });
    expect(await run(fromArchive, 'bash', 'cat /workspace/state.txt; stat -c %s /workspace/random.bin')).toBe('paused\n67108864\n');
    await provider.terminate(fromArchive);
    await provider.terminate(restored);
  });

  it('end an archive in progress reading a workspace copy when its sandbox is terminated, and remove the directory at once', async () => {
    const agentId = newAgentId();
    const sandbox = await provision(agentId);
    await run(sandbox, 'bash', 'head -c 67108864 /dev/urandom > /workspace/random.bin');
    const key = `agents/${agentId}/terminated.tar.zst`;
    await provider.checkpointLocally(sandbox, { key, native: true });
    // Restored before any archive: the paused workspace is copied beside the checkpoint, and the archive mounts that copy to read it.
    const restored = await provision(agentId, { key, level: 'native' });
    const kept = readdirSync(sandboxDir(agentId)).find((name) => name.startsWith('kept-'))!;
    const archiving = archiveOutcome(agentId, key);
    const copyMount = join(sandboxDir(agentId), kept, 'workspace');
    await expect.poll(() => readFileSync('/proc/self/mountinfo', 'utf8').includes(` ${copyMount} `), { timeout: 15_000, interval: 5 }).toBe(true);

    await provider.terminate(restored);
    expect(existsSync(sandboxDir(agentId))).toBe(false);
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(copyMount);
    expect(await archiving).toMatch(/^stored$|cancelled: its agent was terminated/);
  });

  it('report a kept checkpoint that is gone and was never archived as lost', async () => {
    const agentId = newAgentId();
    const error = await provider.archiveCheckpoint(agentId, { storage, key: `agents/${agentId}/never.tar.zst` }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).details.lost).toBe(true);
  });

  it('checkpoint and restore a sandbox holding 200 MB of Python memory', async () => {
    const agentId = newAgentId();
    const sandbox = await provision(agentId);
    await startCounter(sandbox, 200);
    const before = await waitForCount(agentId, 3);
    const pages = (200 * 1024 * 1024) / 4096;
    expect(before.memoryCheck).toBe(pages);

    const checkpoint = await timed(() => provider.checkpoint(sandbox, { storage, key: `agents/${agentId}/native.tar.zst`, native: true }));
    expect(checkpoint.value.level).toBe('native');
    const restore = await timed(() => provision(agentId, { archive: checkpoint.value, level: 'native' }));
    const restored = readCounter(agentId)!;
    const firstExec = await timed(() => run(restore.value, 'bash', 'echo ready'));
    const later = await waitForCount(agentId, restored.count + 5);
    expect(later).toMatchObject({ pid: before.pid, memoryCheck: pages });

    console.log(
      `200 MB sandbox: archive ${(checkpoint.value.sizeBytes / 1024 / 1024).toFixed(1)} MiB, ` +
        `checkpoint ${checkpoint.ms} ms, restore ${restore.ms} ms, first exec after restore ${firstExec.ms} ms`,
    );
    await provider.terminate(restore.value);
  });
});
