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
 * alone over the channel; the launcher's client (perl) too through `runsc exec`. A spare interpreter
 * (ADR 56) is named spare-<its name>.
 */
const OTHER_PROCESSES = [
  'import os',
  'def name(pid):',
  "    command = open(f'/proc/{pid}/cmdline', 'rb').read()",
  "    comm = open(f'/proc/{pid}/comm').read().strip()",
  "    return f'spare-{comm}' if b'spare.py' in command or b'BERTH_SPARE_FILE' in command else comm",
  "names = {name(pid) for pid in os.listdir('/proc') if pid.isdigit() and int(pid) != os.getpid()}",
  "print(' '.join(sorted(names)))",
].join('\n');

/** The spares waiting in the sandbox (ADR 56) as `<name>:<pid>:<resident KiB>` lines, sorted by name. */
const SPARES = [
  'import os',
  'found = []',
  "for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:",
  "    command = open(f'/proc/{pid}/cmdline', 'rb').read()",
  "    if b'spare.py' in command or b'BERTH_SPARE_FILE' in command:",
  "        rss = [line.split()[1] for line in open(f'/proc/{pid}/status') if line.startswith('VmRSS')]",
  "        found.append(f\"{open(f'/proc/{pid}/comm').read().strip()}:{pid}:{rss[0] if rss else 0}\")",
  "print('\\n'.join(sorted(found)))",
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
    // The exec runs in the python spare; bash's waits since the exec of bash before. A second python
    // spare waits when the one taken had only just started (execs back to back keep two).
    expect(await run(sandbox, 'python', OTHER_PROCESSES)).toMatch(/^berth-egress berth-launcher spare-bash( spare-python3)?\n$/);
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
    // The spares were checkpointed and restored with the rest, and serve execs there.
    expect(await run(sandbox, 'python', OTHER_PROCESSES)).toMatch(/^berth-egress berth-launcher sleep spare-bash( spare-python3)?\n$/);
    expect(await barrier(sandbox, 'after-restore')).toEqual([0, 0, 0, 0]);
  });

  it('fail with a provider error when the sandbox dies during an exec', async () => {
    const running = provider.exec(sandbox, { language: 'bash', code: 'sleep 60', timeoutMs: 120_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    spawnSync('runsc', [`--root=${join(dataDir, 'runsc')}`, 'kill', '--all', agentId, 'KILL']);
    const error = await running.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).message).toMatch(/the sandbox is (gone|not running|not answering)/);
    // Later calls that need the launcher say the same, not that it is from an older Berth.
    const later = await provider.files!.mkdir(sandbox, '/workspace/after', { parents: true }).catch((caught: unknown) => caught);
    expect(later).toBeInstanceOf(ProviderError);
    expect((later as ProviderError).message).toMatch(/the sandbox is (gone|not running|not answering)/);
    await provider.terminate(sandbox);
  });
});

/** A program's pid, and what it sees of itself (PYTHON_PROBE / BASH_PROBE). */
const PYTHON_PROBE = [
  'import json, os, signal, sys',
  "print(json.dumps({'argv': sys.argv, 'name': __name__, 'file': __file__, 'path0': sys.path[0], 'main': sorted(vars(sys.modules['__main__'])),",
  "    'env': {k: v for k, v in os.environ.items() if k != 'BERTH_SPARE_INTERPRETERS'}, 'cwd': os.getcwd(), 'umask': os.umask(0o22),",
  "    'leader': [os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid()], 'fds': sorted(os.listdir('/proc/self/fd')),",
  "    'signals': [str(signal.getsignal(n)) for n in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGHUP)], 'modules': sorted(sys.modules)}))",
  'print(os.getpid())',
].join('\n');
const BASH_PROBE = [
  `echo "$0 $# $(umask) $([ "$(ps -o sid= -p $$)" -eq $$ ] && echo leader)"`,
  "set | grep -v -e '^_=' -e '^BASH_LINENO=' -e '^BASH_ARGV=' -e '^BASH_ARGC=' -e '^SECONDS=' -e '^BERTH_SPARE_INTERPRETERS=' | grep -v -e '^[A-Z_]*=\\$.*/run/berth/exec/'",
  "env | grep -v -e '^_=' -e '^BERTH_SPARE_INTERPRETERS=' | sort; trap -p; ls /proc/self/fd",
  'echo $$',
].join('\n');

describe('spare interpreters (ADR 56)', () => {
  let sandbox: SandboxRef;
  const cold = { BERTH_SPARE_INTERPRETERS: '0' };

  beforeAll(async () => {
    sandbox = await provision(newAgentId());
  });

  afterAll(async () => {
    await provider.terminate(sandbox);
  });

  /** The spares waiting, by name: [pid, resident KiB]; once `names` are all there. */
  async function spares(names: string[]): Promise<Map<string, [number, number]>> {
    for (let attempt = 0; ; attempt++) {
      const result = await provider.exec(sandbox, { language: 'bash', code: 'true', timeoutMs: 30_000, env: cold });
      expect(result.exitCode).toBe(0);
      const listed = await provider.exec(sandbox, { language: 'python', code: SPARES, timeoutMs: 30_000, env: cold });
      const found = new Map(
        listed.stdout
          .split('\n')
          .filter(Boolean)
          .map((line) => line.split(':'))
          .map(([name, pid, rss]) => [name!, [Number(pid), Number(rss)] as [number, number]]),
      );
      if (names.every((name) => found.has(name)) || attempt > 50) return found;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it('none in a sandbox that never execed; then one per language, each run in the next exec as a cold start would be', async () => {
    expect((await spares([])).size).toBe(0);
    await run(sandbox, 'python', 'pass');
    await run(sandbox, 'bash', 'true');
    const waiting = await spares(['python3', 'bash']);
    expect([...waiting.keys()].sort()).toEqual(['bash', 'python3']);
    // Their memory, for docs/benchmarks.md.
    console.log(`spare resident memory: ${[...waiting].map(([name, [, rss]]) => `${name} ${rss} KiB`).join(', ')}`);
    for (const [language, probe, name] of [['python', PYTHON_PROBE, 'python3'], ['bash', BASH_PROBE, 'bash']] as const) {
      const coldRun = await provider.exec(sandbox, { language, code: probe, timeoutMs: 30_000, env: cold });
      const spareRun = await provider.exec(sandbox, { language, code: probe, timeoutMs: 30_000 });
      const coldLines = coldRun.stdout.trimEnd().split('\n');
      const spareLines = spareRun.stdout.trimEnd().split('\n');
      expect(Number(spareLines.pop())).toBe(waiting.get(name)![0]);
      expect(Number(coldLines.pop())).not.toBe(waiting.get(name)![0]);
      // The program file's name differs from exec to exec.
      const same = (lines: string[]) => lines.map((line) => line.replace(/\/run\/berth\/exec\/[0-9a-f-]+\.(py|sh)/g, 'FILE'));
      expect(same(spareLines)).toEqual(same(coldLines));
      expect([spareRun.stderr, spareRun.exitCode]).toEqual(['', 0]);
    }
  });

  it('report errors, exit statuses and limits as a cold start would', async () => {
    await spares(['python3', 'bash']);
    for (const [language, code] of [
      ['python', 'def f():\n    raise ValueError("boom")\nf()'],
      ['python', 'raise SystemExit(5)'],
      ['python', 'x = ('],
      ['bash', 'echo a; exit 7'],
      ['bash', 'if then )'],
    ] as const) {
      const coldRun = await provider.exec(sandbox, { language, code, timeoutMs: 30_000, env: cold });
      const spareRun = await provider.exec(sandbox, { language, code, timeoutMs: 30_000 });
      const same = (text: string) => text.replace(/\/run\/berth\/exec\/[0-9a-f-]+\.(py|sh)/g, 'FILE');
      expect([same(spareRun.stdout), same(spareRun.stderr), spareRun.exitCode]).toEqual([same(coldRun.stdout), same(coldRun.stderr), coldRun.exitCode]);
    }
    await spares(['python3']);
    await expect(provider.exec(sandbox, { language: 'python', code: 'import time\ntime.sleep(30)', timeoutMs: 500 })).rejects.toBeInstanceOf(ExecTimeoutError);
    expect(await run(sandbox, 'bash', 'pgrep -f time.sleep || echo none')).toBe('none\n');
  });

  it('fall back to a cold start for another environment, and to a new spare after a spare died', async () => {
    const waiting = await spares(['python3', 'bash']);
    const result = await provider.exec(sandbox, { language: 'bash', code: 'echo "$GREETING $$"', timeoutMs: 30_000, env: { GREETING: 'hi' } });
    const [greeting, pid] = result.stdout.split(' ');
    expect(greeting).toBe('hi');
    expect(Number(pid)).not.toBe(waiting.get('bash')![0]);
    await run(sandbox, 'bash', `kill -KILL ${waiting.get('python3')![0]}`);
    const after = await provider.exec(sandbox, { language: 'python', code: 'import os; print(os.getpid())', timeoutMs: 30_000 });
    expect([after.exitCode, Number(after.stdout)]).not.toContain(waiting.get('python3')![0]);
    expect(after.exitCode).toBe(0);
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
