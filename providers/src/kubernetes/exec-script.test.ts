import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync } from 'node:fs';
import { CANCEL_SCRIPT, EXEC_SCRIPT, execNonce, execStdin, takeTimeoutLine } from './exec-script.js';
import { OutputLimit } from '../program.js';

// The script as a pod's container runs it, here with this host's sh and coreutils.
const workspace = mkdtempSync(join(tmpdir(), 'berth-exec-script-'));
afterAll(() => rmSync(workspace, { recursive: true, force: true }));

function run(code: string, limitSeconds: number, maxOutputBytes = 1024 * 1024, options: Parameters<typeof execStdin>[2] = {}, nonce = execNonce()) {
  const child = spawn('sh', ['-c', EXEC_SCRIPT, 'berth-exec', 'sh', String(limitSeconds), 'bash'], {
    env: { ...process.env, BERTH_WORKSPACE: workspace },
  });
  const stdout = new OutputLimit(maxOutputBytes);
  const stderr = new OutputLimit(maxOutputBytes);
  child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  child.stdin.end(execStdin(nonce, code, options));
  return new Promise<{ exitCode: number | null; stdout: string; timedOut: boolean; stderr: string }>((resolve) =>
    child.on('close', (exitCode) => resolve({ exitCode, stdout: stdout.text(), ...takeTimeoutLine(stderr.text(), stderr.tail(), nonce) })),
  );
}

describe('the pod exec script', () => {
  it('runs the program in the workspace and passes its output and exit code', async () => {
    const result = await run('echo "in $(pwd)"; echo oops >&2; exit 4', 5);
    expect(result).toEqual({ exitCode: 4, stdout: `in ${workspace}\n`, stderr: 'oops\n', timedOut: false });
  });

  it("reports a program that prints timeout's notice and exits 124 as what it is", async () => {
    const result = await run(`echo "timeout: sending signal TERM to command 'bash'" >&2; exit 124`, 5);
    expect(result).toEqual({ exitCode: 124, stdout: '', stderr: "timeout: sending signal TERM to command 'bash'\n", timedOut: false });
  });

  it('says so when the limit stopped the program, and keeps its output', async () => {
    const result = await run('echo started; echo partial >&2; sleep 30', 1);
    expect(result).toEqual({ exitCode: 124, stdout: 'started\n', stderr: 'partial\n', timedOut: true });
  });

  it('finds the line after more stderr than the output limit keeps', async () => {
    const result = await run('head -c 200000 /dev/zero | tr "\\0" x >&2; sleep 30', 1, 1000);
    expect(result.timedOut).toBe(true);
    expect(result.stderr).toMatch(/^x{1000}\n\[output truncated: \d+ more bytes not shown\]\n$/);
  });

  it('takes the environment, the working directory and stdin of the exec options', async () => {
    mkdirSync(join(workspace, 'sub dir'), { recursive: true });
    const stdin = Buffer.concat([Buffer.from('line one\n'), Buffer.alloc(300_000, 'x')]);
    const result = await run('echo "$GREETING|$MULTI|$(pwd)"; wc -c', 5, 1024 * 1024, {
      env: { GREETING: 'hi there', MULTI: 'a=b\nc $(not run)' },
      cwd: join(workspace, 'sub dir'),
      stdin,
    });
    expect(result).toEqual({ exitCode: 0, stdout: `hi there|a=b\nc $(not run)|${join(workspace, 'sub dir')}\n${stdin.length}\n`, stderr: '', timedOut: false });
    // Without stdin the program reads nothing; a program of many lines arrives whole.
    const empty = await run('wc -c\n\necho "$((1 + 1))"', 5);
    expect(empty.stdout).toBe('0\n2\n');
    const missing = await run('pwd', 5, 1024, { cwd: join(workspace, 'nowhere') });
    expect(missing.exitCode).toBe(127);
    expect(missing.stderr).toContain('nowhere');
  });

  it('ends a program when the cancel script names its exec', async () => {
    const nonce = execNonce();
    const running = run('echo started; sleep 30', 60, 1024, {}, nonce);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const cancel = spawn('sh', ['-c', CANCEL_SCRIPT, 'berth-cancel', nonce]);
    await new Promise((resolve) => cancel.on('close', resolve));
    const result = await running;
    expect(result.stdout).toBe('started\n');
    // `timeout` passed TERM on and ended as the program did (128 + 15), long before its limit
    // (it reports the signal it passed on as it does at the limit; nobody reads that answer).
    expect(result.exitCode).toBe(143);
  });

  it('passes on why the interpreter could not start', async () => {
    const nonce = execNonce();
    const child = spawn('sh', ['-c', EXEC_SCRIPT, 'berth-exec', 'py', '5', 'no-such-interpreter'], { env: { ...process.env, BERTH_WORKSPACE: workspace } });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.end(execStdin(nonce, 'print(1)'));
    const exitCode = await new Promise((resolve) => child.on('close', resolve));
    expect(exitCode).toBe(127);
    expect(stderr).toContain('no-such-interpreter');
    expect(stderr).not.toContain(nonce);
  });
});
