import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxRef } from '../../crds/src/index.js';
import { ExecTimeoutError, ProviderError, type ExecLanguage } from '../../common/src/index.js';
import { loadConfig } from '../../common/src/config.js';
import { createLogger } from '../../common/src/log.js';
import { GUEST_DIR } from '../../providers/src/guest.js';
import { sandboxSpec } from '../../providers/src/local/bundle.js';
import { createLocalProvider, ImageStore, type LocalProvider } from '../../providers/src/local/index.js';
import { DirectoryStorage } from '../../operator/src/snapshots/directory.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Execs in local sandboxes over the launcher's channel (ADR 20), against real gVisor sandboxes:
 * no host process per call, side by side, after a native checkpoint and restore, and through
 * `runsc exec` for a sandbox started by an older Berth, whose launcher has no channel.
 */
const log = createLogger({ level: 'warn', name: 'local-exec-test' });
const config = loadConfig({});
let dataDir: string;
let provider: LocalProvider;

beforeAll(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-exec-'));
  chmodSync(dataDir, 0o755);
  provider = createLocalProvider({ ...config, dataDir }, log);
});

afterAll(() => {
  if (dataDir) removeDataDir(dataDir);
});

const newAgentId = () => `agt_${randomBytes(6).toString('hex')}`;

function provision(agentId: string, restore?: Parameters<LocalProvider['provision']>[0]['restore']): Promise<SandboxRef> {
  return provider.provision({ agentId, sessionId: 'ses_exec', timeoutSeconds: 600, compute: 'python', browser: false, env: {}, ...(restore ? { restore } : {}) });
}

async function run(sandbox: SandboxRef, language: ExecLanguage, code: string): Promise<string> {
  const result = await provider.exec(sandbox, { language, code, timeoutMs: 30_000 });
  expect(result.exitCode, result.stderr).toBe(0);
  return result.stdout;
}

/** A CONNECT through the sandbox's egress port; prints the proxy's status line (403: no policy allows it). */
const CONNECT_THROUGH_RELAY = [
  'import socket',
  "with socket.create_connection(('127.0.0.1', 3128), timeout=20) as s:",
  "    s.sendall(b'CONNECT example.com:443 HTTP/1.1\\r\\nHost: example.com:443\\r\\n\\r\\n')",
  "    print(s.recv(4096).split(b'\\r\\n')[0].decode())",
].join('\n');

/**
 * The names of the sandbox's other processes while an exec runs (a python program): the launcher
 * alone over the channel; the launcher's client (perl) too through `runsc exec`.
 */
const OTHER_PROCESSES = [
  'import os',
  "names = {open(f'/proc/{pid}/comm').read().strip() for pid in os.listdir('/proc') if pid.isdigit() and int(pid) != os.getpid()}",
  "print(' '.join(sorted(names)))",
].join('\n');

/** Four execs that each wait until all four have started: run one after another, the first would fail at its limit. */
/**
 * Starts a background `sleep` in the sandbox, checkpoints it natively and restores it as the same
 * agent's sandbox, which it returns once the sleep is found still running there.
 */
async function restoredWithSleeper(agentId: string, sandbox: SandboxRef): Promise<SandboxRef> {
  await run(sandbox, 'bash', 'nohup sleep 600 >/dev/null 2>&1 </dev/null & echo $! > /workspace/sleeper');
  const storage = new DirectoryStorage(join(dataDir, 'snapshots'));
  const key = `agents/${agentId}/native.tar.zst`;
  const archive = await provider.checkpoint(sandbox, { storage, key, native: true });
  expect(archive.level).toBe('native');
  const restored = await provision(agentId, { storage, key, archive, level: 'native' });
  expect(await run(restored, 'bash', 'kill -0 $(cat /workspace/sleeper) && echo alive')).toBe('alive\n');
  return restored;
}

async function barrier(sandbox: SandboxRef, name: string): Promise<number[]> {
  const dir = `/tmp/${name}`;
  const code = `mkdir -p ${dir}; touch ${dir}/$RANDOM$RANDOM; for i in $(seq 300); do [ $(ls ${dir} | wc -l) -ge 4 ] && exit 0; sleep 0.05; done; exit 1`;
  const results = await Promise.all([1, 2, 3, 4].map(() => provider.exec(sandbox, { language: 'bash', code, timeoutMs: 30_000 })));
  return results.map((result) => result.exitCode);
}

describe('execs over the launcher channel', () => {
  const agentId = newAgentId();
  let sandbox: SandboxRef;

  beforeAll(async () => {
    sandbox = await provision(agentId);
  });

  it('run with no process of the host in the sandbox: the launcher starts the program itself', async () => {
    expect(await run(sandbox, 'python', OTHER_PROCESSES)).toBe('berth-launcher\n');
    expect(await run(sandbox, 'bash', 'echo "$(cat /proc/$PPID/comm) $PWD $PYTHONPATH"; cat')).toBe('berth-launcher /workspace /workspace\n');
  });

  it('start the egress relay at the first connection to its port, which it carries to the proxy (ADR 49)', async () => {
    expect(await run(sandbox, 'python', CONNECT_THROUGH_RELAY)).toMatch(/^HTTP\/1\.1 403 /);
    expect(await run(sandbox, 'python', OTHER_PROCESSES)).toBe('berth-egress berth-launcher\n');
    expect(await run(sandbox, 'python', CONNECT_THROUGH_RELAY)).toMatch(/^HTTP\/1\.1 403 /);
  });

  it("report the program's exit status, never what its output says", async () => {
    const result = await provider.exec(sandbox, {
      language: 'bash',
      code: `echo out; echo "timeout: sending signal TERM to command 'x'" >&2; exit 124`,
      timeoutMs: 30_000,
    });
    expect(result).toMatchObject({ stdout: 'out\n', stderr: "timeout: sending signal TERM to command 'x'\n", exitCode: 124 });
  });

  it('stop a program at its limit inside the sandbox, and the sandbox lives on', async () => {
    await expect(provider.exec(sandbox, { language: 'python', code: 'import time\ntime.sleep(30)', timeoutMs: 500 })).rejects.toBeInstanceOf(ExecTimeoutError);
    expect(await run(sandbox, 'bash', 'pgrep -f time.sleep || echo none')).toBe('none\n');
  });

  it('run side by side on one sandbox', async () => {
    expect(await barrier(sandbox, 'side-by-side')).toEqual([0, 0, 0, 0]);
  });

  it('go on after a native checkpoint and restore, over the channel again', async () => {
    sandbox = await restoredWithSleeper(agentId, sandbox);
    expect(await run(sandbox, 'python', OTHER_PROCESSES)).toBe('berth-egress berth-launcher sleep\n');
    expect(await barrier(sandbox, 'after-restore')).toEqual([0, 0, 0, 0]);
  });

  it('fail with a provider error when the sandbox dies during an exec', async () => {
    const running = provider.exec(sandbox, { language: 'bash', code: 'sleep 60', timeoutMs: 120_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    spawnSync('runsc', [`--root=${join(dataDir, 'runsc')}`, 'kill', '--all', agentId, 'KILL']);
    const error = await running.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).message).toMatch(/the sandbox is (gone|not running|not answering)/);
    await provider.terminate(sandbox);
  });
});

describe('a sandbox started by an older Berth, without the channel', () => {
  const agentId = newAgentId();
  let sandbox: SandboxRef;

  beforeAll(async () => {
    // What an older Berth left running: the same sandbox without the channel's mount, started
    // without --host-uds; this Berth adopts it.
    const root = join(dataDir, 'sandboxes', agentId);
    for (const dir of ['bundle', 'workspace', 'exec']) mkdirSync(join(root, dir), { recursive: true });
    const spec = sandboxSpec({
      containerId: agentId,
      image: 'python',
      compute: 'python',
      rootfs: await new ImageStore(config.imageDir, log).ready('python'),
      workspace: join(root, 'workspace'),
      execDir: join(root, 'exec'),
      guestDir: GUEST_DIR,
      env: {},
      cpus: 1,
      memoryBytes: 512 * 1024 ** 2,
      tmpBytes: 64 * 1024 ** 2,
    });
    writeFileSync(join(root, 'bundle', 'config.json'), JSON.stringify(spec));
    const console = openSync(join(root, 'console.log'), 'a');
    const started = spawnSync(
      'runsc',
      [`--root=${join(dataDir, 'runsc')}`, '--network=none', `--overlay2=root:memory,size=${64 * 1024 ** 2}`, 'run', '--detach', `--bundle=${join(root, 'bundle')}`, agentId],
      { stdio: ['ignore', console, console] },
    );
    expect(started.status).toBe(0);
    sandbox = await provision(agentId);
  });

  it("runs execs through runsc exec and the launcher's client", async () => {
    expect(await run(sandbox, 'python', OTHER_PROCESSES)).toBe('berth-launcher perl\n');
    const result = await provider.exec(sandbox, { language: 'bash', code: 'echo out; echo err >&2; exit 124', timeoutMs: 30_000 });
    expect(result).toMatchObject({ stdout: 'out\n', stderr: 'err\n', exitCode: 124 });
    await expect(provider.exec(sandbox, { language: 'bash', code: 'sleep 30', timeoutMs: 500 })).rejects.toBeInstanceOf(ExecTimeoutError);
  });

  it('runs them side by side too', async () => {
    expect(await barrier(sandbox, 'fallback')).toEqual([0, 0, 0, 0]);
  });

  it('is checkpointed and restored natively by this Berth, and still execs through runsc exec', async () => {
    sandbox = await restoredWithSleeper(agentId, sandbox);
    expect(await run(sandbox, 'python', OTHER_PROCESSES)).toBe('berth-launcher perl sleep\n');
    await provider.terminate(sandbox);
  });
});
