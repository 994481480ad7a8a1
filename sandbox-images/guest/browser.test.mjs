// Unit tests of the browser driver (browser.mjs) without a browser: its request and its answer record.
import { spawnSync } from 'node:child_process';
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

const DRIVER = new URL('./browser.mjs', import.meta.url).pathname;

function record(stdout) {
  const newline = stdout.indexOf(10);
  const length = Number(stdout.subarray(0, newline).toString());
  const body = stdout.subarray(newline + 1);
  assert.equal(body.length, length, 'the length prefix counts the bytes of the JSON');
  return JSON.parse(body.toString('utf8'));
}

// PATH without berth-browser: the driver cannot start Chromium, which it must say in its record.
const NO_BROWSER_ENV = { ...process.env, PATH: '/nonexistent' };

test('answers a browser it cannot start with a failure record and exit status 1', () => {
  const request = { action: 'text', args: {}, budgetMs: 5000 };
  const run = spawnSync(process.execPath, [DRIVER, JSON.stringify(request)], { env: NO_BROWSER_ENV, timeout: 20_000 });
  assert.equal(run.status, 1);
  const answer = record(run.stdout);
  assert.equal(answer.ok, false);
  assert.match(answer.error, /could not start berth-browser .*browser tools need a browser agent/);
  assert.equal(run.stderr.toString(), '');
});

test('takes its request from the line the host puts before it, whatever characters it holds', () => {
  const tricky = 'a "quote" `tick` ${x} \\ \n \u2028 ü🌍';
  const request = { action: 'navigate', args: { url: tricky }, budgetMs: 5000 };
  const program = `globalThis.BERTH_REQUEST = ${JSON.stringify(JSON.stringify(request))};\n${readFileSync(DRIVER, 'utf8')}`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', program], { env: NO_BROWSER_ENV, timeout: 20_000 });
  assert.equal(run.status, 1);
  assert.equal(record(run.stdout).ok, false);
});

test('gives up within its budget, saying what it was doing', () => {
  // A DevTools port that never answers: 127.0.0.1:9222 is not listening, and berth-browser is a
  // program that starts and waits, so the driver waits for Chromium until its budget is spent.
  const run = spawnSync(process.execPath, [DRIVER, JSON.stringify({ action: 'text', args: {}, budgetMs: 1500 })], {
    env: { ...process.env, PATH: `${new URL('.', import.meta.url).pathname}testdata:/usr/bin:/bin` },
    timeout: 20_000,
  });
  assert.equal(run.status, 1);
  assert.match(record(run.stdout).error, /^gave up after 2 s while starting Chromium/);
});
