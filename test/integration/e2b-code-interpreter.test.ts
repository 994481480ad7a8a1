import * as interpreter from '@e2b/code-interpreter';
import * as interpreterOld from '@e2b/code-interpreter-old';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BerthProcess } from '../helpers/berth.js';
import { startE2bBerth, type E2bBerth } from '../helpers/e2b-berth.js';

/**
 * The code interpreter of the E2B-compatible surface (ADR 44) driven by the official
 * `@e2b/code-interpreter` from the npm registry, two pinned versions (2.8.0, the newest, through
 * E2B_API_URL and E2B_SANDBOX_URL and the `E2b-Sandbox-Port` header; 2.0.1 through the host name
 * `49999-<sandboxId>.<domain>` behind a wildcard TLS front), against a real `berth up` with real
 * gVisor sandboxes of the python image (matplotlib in it).
 */
const DOMAIN = 'e2b.test';
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const PLOT = 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title("squares")\nplt.show()';
let e2bBerth: E2bBerth;
let berth: BerthProcess;
let key: string;

beforeAll(async () => {
  e2bBerth = await startE2bBerth(DOMAIN);
  ({ berth, key } = e2bBerth);
});
afterAll(async () => {
  const code = await e2bBerth.stop();
  // A crash of berth up shows its last words rather than only an exit code.
  expect(code, berth.stderr().slice(-4000)).toBe(0);
});

function pngOf(execution: { results: { png?: string }[] }): Buffer {
  const png = execution.results.find((result) => result.png !== undefined)?.png;
  expect(png, JSON.stringify(execution)).toBeDefined();
  return Buffer.from(png!, 'base64');
}

describe('@e2b/code-interpreter 2.8 through E2B_API_URL and E2B_SANDBOX_URL', () => {
  const { Sandbox } = interpreter;
  let sandbox: interpreter.Sandbox;

  beforeAll(async () => {
    sandbox = await Sandbox.create({ metadata: { suite: 'interpreter' }, timeoutMs: 600_000 });
  }, 120_000);
  afterAll(async () => {
    await sandbox?.kill();
  });

  it('creates a python agent of the code interpreter template', async () => {
    const agent = await berth.api(key).get(`/v1/agents/agt_${sandbox.sandboxId}`);
    expect(agent.body).toMatchObject({ compute: 'python', metadata: { suite: 'interpreter', 'e2b-template': 'code-interpreter-v1' } });
    expect((await sandbox.getInfo()).templateId).toBe('code-interpreter-v1');
  });

  it('returns the last expression as the main result, and keeps state between runs', async () => {
    const sum = await sandbox.runCode('1+1');
    expect(sum.text).toBe('2');
    expect(sum.results).toHaveLength(1);
    expect(sum.results[0]!.isMainResult).toBe(true);
    expect(sum.error).toBeUndefined();

    await sandbox.runCode('x = 41');
    expect((await sandbox.runCode('x + 1')).text).toBe('42');
    expect((await sandbox.runCode('y = 1')).results).toEqual([]);
  }, 60_000);

  it('streams stdout and stderr as logs and through the callbacks, a child process included', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const execution = await sandbox.runCode('import os, sys\nprint("hello")\nsys.stdout.flush()\nos.system("echo from-child")\nprint("oops", file=sys.stderr)', {
      onStdout: (message) => void out.push(message.line),
      onStderr: (message) => void err.push(message.line),
    });
    expect(execution.logs.stdout.join('')).toBe('hello\nfrom-child\n');
    expect(execution.logs.stderr.join('')).toBe('oops\n');
    expect(out.join('')).toBe('hello\nfrom-child\n');
    expect(err.join('')).toBe('oops\n');
  }, 60_000);

  it('reports an error with its name, value and traceback', async () => {
    const execution = await sandbox.runCode('def divide():\n    return 1 / 0\ndivide()');
    expect(execution.error).toMatchObject({ name: 'ZeroDivisionError', value: 'division by zero' });
    expect(execution.error!.traceback).toContain('divide');
    expect((await sandbox.runCode('undefined_name')).error?.name).toBe('NameError');
  }, 60_000);

  it('returns a matplotlib figure as a PNG', async () => {
    const execution = await sandbox.runCode(PLOT);
    expect(execution.error).toBeUndefined();
    const png = pngOf(execution);
    expect(png.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
    expect(png.length).toBeGreaterThan(1000);
    expect(execution.results.find((result) => result.png)!.isMainResult).toBe(false);
  }, 120_000);

  it('keeps contexts apart, and refuses a language it does not serve', async () => {
    const context = await sandbox.createCodeContext({ cwd: '/home/user' });
    expect(context).toMatchObject({ language: 'python', cwd: '/workspace' });
    await sandbox.runCode('only_here = "yes"', { context });
    expect((await sandbox.runCode('only_here', { context })).text).toBe("'yes'");
    expect((await sandbox.runCode('"only_here" in globals()')).text).toBe('False');
    expect((await sandbox.listCodeContexts()).map((listed) => listed.id)).toContain(context.id);
    await sandbox.restartCodeContext(context);
    expect((await sandbox.runCode('"only_here" in globals()', { context })).text).toBe('False');
    await sandbox.removeCodeContext(context);
    await expect(sandbox.runCode('1', { context })).rejects.toThrow();
    await expect(sandbox.runCode('console.log(1)', { language: 'javascript' })).rejects.toThrow(/400/);
  }, 60_000);

  it('keeps the interpreter and its variables through a pause and resume', async () => {
    await sandbox.runCode('kept = [1, 2, 3]');
    expect(await sandbox.pause()).toBe(true);
    const resumed = await Sandbox.connect(sandbox.sandboxId);
    expect((await resumed.runCode('sum(kept)')).text).toBe('6');
  }, 120_000);
});

describe('@e2b/code-interpreter 2.0 through the host name 49999-<sandboxId>.<domain>', () => {
  const { Sandbox } = interpreterOld;
  let sandbox: interpreterOld.Sandbox;

  beforeAll(async () => {
    sandbox = await Sandbox.create({ metadata: { suite: 'interpreter-2.0' }, timeoutMs: 300_000 });
  }, 120_000);
  afterAll(async () => {
    await sandbox?.kill();
  });

  it('runs code: a value, state, stdout, an error and a PNG', async () => {
    expect(sandbox.getHost(49999)).toBe(`49999-${sandbox.sandboxId}.${DOMAIN}`);
    expect((await sandbox.runCode('1+1')).text).toBe('2');
    await sandbox.runCode('z = 5');
    const printed = await sandbox.runCode('print(z * 2)');
    expect(printed.logs.stdout).toEqual(['10\n']);
    expect((await sandbox.runCode('raise ValueError("bad")')).error).toMatchObject({ name: 'ValueError', value: 'bad' });
    expect(pngOf(await sandbox.runCode(PLOT)).subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
  }, 120_000);
});
