import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { armProcess } from './process.js';

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
