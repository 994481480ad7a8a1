import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { armProcess, runProcess, SpareProcesses } from './process.js';

describe('armProcess', () => {
  it('runs the program with its arguments on run(), its time limit counted from then', async () => {
    const armed = armProcess('sh', ['-c', 'echo "$0 $1"; echo oops >&2; exit 3', 'one', 'two'], { timeoutMs: 150 });
    await sleep(300); // longer than the limit: waiting to run does not count
    const result = await armed.run();
    expect(result).toMatchObject({ exitCode: 3, timedOut: false, stdout: 'one two\n', stderr: 'oops\n' });
  });

  it('stops a program that outlasts its limit after run()', async () => {
    const result = await armProcess('sleep', ['5'], { timeoutMs: 100 }).run();
    expect(result.timedOut).toBe(true);
  });

  it('ends without running the program when cancelled', async () => {
    const armed = armProcess('sh', ['-c', 'echo ran'], { timeoutMs: 5_000 });
    armed.cancel();
    const result = await armed.run();
    expect(result).toMatchObject({ exitCode: 1, stdout: '' });
  });
});

describe('SpareProcesses', () => {
  /** The pids of this process's shells waiting for a program. */
  const waiting = async () => (await runProcess('pgrep', ['-P', String(process.pid), '-f', 'read -r arg'])).stdout.split('\n').filter(Boolean);

  /** `test` given `count` spares, made; they are stopped after it. */
  async function withSpares(count: number, test: (spares: SpareProcesses) => Promise<void>): Promise<void> {
    const spares = new SpareProcesses(count);
    spares.fill();
    try {
      await test(spares);
    } finally {
      spares.stop();
    }
  }

  it('runs a program in a spare as a process of its own would; fill() makes the spare again', () =>
    withSpares(1, async (spares) => {
      const result = await runProcess('sh', ['-c', 'echo "$0 [$1]"; echo oops >&2; exit 3', 'one', 'two words'], { spares, timeoutMs: 5_000 });
      expect(result).toMatchObject({ exitCode: 3, timedOut: false, stdout: 'one [two words]\n', stderr: 'oops\n' });
      spares.fill();
      const again = spares.take();
      expect(again?.exitCode).toBeNull();
      again?.stdin?.end();
    }));

  it('hands an armed program a spare: run() runs it, cancel() ends the spare without running it', () =>
    withSpares(2, async (spares) => {
      const ran = armProcess('sh', ['-c', 'echo ran'], { spares, timeoutMs: 5_000 });
      const cancelled = armProcess('sh', ['-c', 'echo ran'], { spares, timeoutMs: 5_000 });
      cancelled.cancel();
      expect(await ran.run()).toMatchObject({ exitCode: 0, stdout: 'ran\n' });
      expect(await cancelled.run()).toMatchObject({ exitCode: 1, stdout: '' });
    }));

  it('passes over a spare that died, and forks for a program when none is left', () =>
    withSpares(1, async (spares) => {
      const taken = spares.take()!;
      taken.stdin?.end();
      expect(spares.take()).toBeUndefined();
      // Made again, a spare that died meanwhile is passed over.
      const before = new Set(await waiting());
      spares.fill();
      const made = (await waiting()).filter((pid) => !before.has(pid));
      expect(made).toHaveLength(1);
      process.kill(Number(made[0]), 'SIGKILL');
      await sleep(200);
      expect(spares.take()).toBeUndefined();
      const result = await runProcess('sh', ['-c', 'echo "$1"', 'sh', 'line one\nline two'], { spares, timeoutMs: 5_000 });
      expect(result).toMatchObject({ exitCode: 0, stdout: 'line one\nline two\n' });
    }));

  it('runs nothing when handed fewer words than it was told (the writer ended half-way)', () =>
    withSpares(1, async (spares) => {
      const spare = spares.take()!;
      let stdout = '';
      spare.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => spare.once('exit', (code) => resolve(code)));
      spare.stdin!.end('4\nsh\n-c\necho ran\n');
      expect(await exited).toBe(1);
      expect(stdout).toBe('');
    }));

  it('stops its idle spares, which end without running anything', async () => {
    const before = new Set(await waiting()); // other tests' spares, ending
    const spares = new SpareProcesses(2);
    spares.fill();
    const made = (await waiting()).filter((pid) => !before.has(pid));
    expect(made).toHaveLength(2);
    spares.stop();
    await sleep(300);
    expect((await waiting()).filter((pid) => made.includes(pid))).toEqual([]);
    expect(spares.take()).toBeUndefined();
  });
});
