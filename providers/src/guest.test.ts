import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GUEST_DIR, guestCode, parseAnswer, parseRecord } from './guest.js';

const files = readdirSync(GUEST_DIR);
const python = files.filter((name) => name.endsWith('.py'));
const javascript = files.filter((name) => name.endsWith('.mjs'));
/** pyflakes from `make lint-guest`'s cache, or the system's. */
const PYFLAKES_VENV = `${GUEST_DIR}/../../node_modules/.cache/berth-guest-lint/bin/python3`;
const pyflakes = [PYFLAKES_VENV, 'python3'].find((interpreter) => spawnSync(interpreter, ['-m', 'pyflakes', '--version']).status === 0);

/** Runs a command in the guest folder; its output is the failure message when it fails. */
function check(command: string, args: string[]): void {
  const run = spawnSync(command, args, { cwd: GUEST_DIR, encoding: 'utf8', env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' }, timeout: 60_000 });
  expect(run.status, `${command} ${args.join(' ')}\n${run.stdout}\n${run.stderr}`).toBe(0);
}

describe('the guest programs, on their own', () => {
  it('are the launcher, its client, the file tools and the browser driver', () => {
    expect(python).toEqual(expect.arrayContaining(['launcher.py', 'files.py']));
    expect(files).toEqual(expect.arrayContaining(['launcher-client.pl', 'browser.mjs']));
  });

  it('compile: python, perl and JavaScript', () => {
    check('python3', ['-B', '-c', 'import sys\nfor name in sys.argv[1:]:\n    compile(open(name).read(), name, "exec")', ...python]);
    check('perl', ['-c', 'launcher-client.pl']);
    for (const name of javascript) check(process.execPath, ['--check', name]);
  });

  it.skipIf(pyflakes === undefined)('pass pyflakes (make lint-guest installs it)', () => {
    check(pyflakes!, ['-m', 'pyflakes', ...python]);
  });

  // The launcher's tests run programs (terminals, background processes, limits): seconds, more on a busy machine.
  it("pass their python tests (python3 -m unittest)", () => {
    check('python3', ['-B', '-m', 'unittest', '-q']);
  }, 60_000);

  it('pass their JavaScript tests (node --test)', () => {
    check(process.execPath, ['--test', ...javascript.filter((name) => name.endsWith('.test.mjs'))]);
  });
});

describe('parseRecord', () => {
  const frame = (json: string) => `${Buffer.byteLength(json)}\n${json}`;

  it('reads one record whose length counts bytes', () => {
    expect(parseRecord(frame('{"text": "ü🌍"}'))).toEqual({ text: 'ü🌍' });
    expect(parseRecord(Buffer.from(frame('[1, 2]')))).toEqual([1, 2]);
  });

  it('refuses anything that is not exactly one whole record', () => {
    for (const text of ['', '{"a": 1}\n', '9\n{"a": 1}', frame('{"a": 1}') + 'more', frame('{"a": 1}').slice(0, -1), 'x\n{}', frame('{bad')]) {
      expect(parseRecord(text), JSON.stringify(text)).toBeUndefined();
    }
  });
});

describe('guestCode and parseAnswer', () => {
  it('puts the request before the program as one string literal line', () => {
    const request = { action: 'read_file', args: { path: 'a "b" \\ \n \u2028' } };
    const code = guestCode('files.py', request);
    const [prelude, ...rest] = code.split('\n');
    expect(prelude).toBe(`BERTH_REQUEST = ${JSON.stringify(JSON.stringify(request))}`);
    expect(rest.join('\n')).toBe(execFileSync('cat', [`${GUEST_DIR}/files.py`], { encoding: 'utf8' }));
    expect(guestCode('browser.mjs', request).split('\n')[0]).toBe(`globalThis.BERTH_REQUEST = ${JSON.stringify(JSON.stringify(request))};`);
  });

  it('reads an answer record, and nothing else', () => {
    const frame = (value: unknown) => `${Buffer.byteLength(JSON.stringify(value))}\n${JSON.stringify(value)}`;
    expect(parseAnswer(frame({ ok: true, result: { paths: [] } }))).toEqual({ ok: true, result: { paths: [] } });
    expect(parseAnswer(frame({ ok: false, error: 'No such file' }))).toEqual({ ok: false, error: 'No such file' });
    expect(parseAnswer(frame({ ok: false }))).toBeUndefined();
    expect(parseAnswer(frame({ result: 1 }))).toBeUndefined();
    expect(parseAnswer('{"ok": true, "result": 1}\n')).toBeUndefined();
  });

  it('finds the guest folder from source and from the build alike', () => {
    expect(existsSync(`${GUEST_DIR}/launcher.py`)).toBe(true);
  });
});
