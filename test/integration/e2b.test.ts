import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as e2b from 'e2b';
import * as e2bV1 from 'e2b-v1';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startBerth, type BerthProcess } from '../helpers/berth.js';
import { startE2bBerth, type E2bBerth } from '../helpers/e2b-berth.js';
import { eventually } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * The E2B-compatible surface (ADR 44) driven by the official JS SDKs from the npm registry, two
 * pinned versions (`e2b`: the newest, through E2B_API_URL and E2B_SANDBOX_URL; `e2b-v1`: the last
 * 1.x, which knows only E2B_DOMAIN, through `https://api.<domain>` and host names behind a
 * wildcard TLS front), against a real `berth up` with real gVisor sandboxes: the control plane,
 * envd's process and filesystem services and /files, and the sandbox's other ports (getHost).
 */
const DOMAIN = 'e2b.test';
/** The envd version the surface claims: the one whose process and filesystem services it implements. */
const ENVD_VERSION = '0.5.2';
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

async function raw(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${berth.baseUrl}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

describe('the newest SDK (e2b 2.x) through E2B_API_URL and E2B_SANDBOX_URL', () => {
  const { Sandbox, CommandExitError } = e2b;
  let sandbox: e2b.Sandbox;

  beforeAll(async () => {
    sandbox = await Sandbox.create({ metadata: { suite: 'e2b-v2', 'berth-user': 'alice' }, timeoutMs: 600_000 });
  }, 120_000);

  it('creates a sandbox that is a Berth agent in the session of the user its metadata names', async () => {
    expect(sandbox.sandboxId).toMatch(/^[0-9a-z]+$/);
    const agent = await berth.api(key).get(`/v1/agents/agt_${sandbox.sandboxId}`);
    expect(agent.status).toBe(200);
    expect(agent.body.compute).toBe('python');
    expect(agent.body.metadata).toMatchObject({ suite: 'e2b-v2', 'berth-user': 'alice', 'e2b-template': 'base' });
    const session = await berth.api(key).get(`/v1/sessions/${agent.body.sessionId}`);
    expect(session.body.userId).toBe('alice');
    const info = await sandbox.getInfo();
    expect(info).toMatchObject({ sandboxId: sandbox.sandboxId, templateId: 'base', state: 'running', metadata: { suite: 'e2b-v2', 'berth-user': 'alice' }, envdVersion: ENVD_VERSION });
    expect(info.cpuCount).toBeGreaterThan(0);
    expect(info.memoryMB).toBeGreaterThan(0);
  });

  it('runs commands: stdout and stderr through the callbacks, exit codes, a non-zero one as CommandExitError', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const result = await sandbox.commands.run('echo to-out; echo to-err >&2; echo $GREETING', {
      onStdout: (data) => void out.push(data),
      onStderr: (data) => void err.push(data),
      envs: { GREETING: 'hello from envs' },
    });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe('to-out\nhello from envs\n');
    expect(result.stderr).toBe('to-err\n');
    expect(out.join('')).toBe('to-out\nhello from envs\n');
    expect(err.join('')).toBe('to-err\n');

    const failed = await sandbox.commands.run('echo partial; exit 3').catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(CommandExitError);
    expect((failed as e2b.CommandExitError).exitCode).toBe(3);
    expect((failed as e2b.CommandExitError).stdout).toBe('partial\n');

    const inDir = await sandbox.commands.run('pwd', { cwd: '/workspace' });
    expect(inDir.stdout).toBe('/workspace\n');
  });

  it('streams output as it comes, not only at the end', async () => {
    const seen: { data: string; at: number }[] = [];
    const started = Date.now();
    await sandbox.commands.run('echo first; sleep 1.5; echo second', { onStdout: (data) => void seen.push({ data, at: Date.now() - started }) });
    expect(seen.map((chunk) => chunk.data).join('')).toBe('first\nsecond\n');
    const first = seen.find((chunk) => chunk.data.includes('first'))!;
    const second = seen.find((chunk) => chunk.data.includes('second'))!;
    // The first line came in its own event, before the program ended.
    expect(first.data).not.toContain('second');
    expect(second.at).toBeGreaterThan(first.at);
  });

  it('pushes each line within milliseconds of its print, stdout and stderr in the order they were written', async () => {
    // The sandbox's clock is this host's (gVisor reads it): a line's time in it against its arrival here.
    const delays: number[] = [];
    const order: string[] = [];
    const onData = (stream: string) => (data: string) => {
      for (const line of data.split('\n').filter(Boolean)) {
        delays.push(Date.now() - Number(line.split(' ')[1]));
        order.push(`${stream} ${line.split(' ')[0]}`);
      }
    };
    await sandbox.commands.run('for i in 1 2 3 4 5 6; do echo "o$i $(date +%s%3N)"; sleep 0.1; echo "e$i $(date +%s%3N)" >&2; sleep 0.1; done', {
      onStdout: onData('out'),
      onStderr: onData('err'),
    });
    expect(order).toEqual([1, 2, 3, 4, 5, 6].flatMap((i) => [`out o${i}`, `err e${i}`]));
    delays.sort((a, b) => a - b);
    // Polled every 200 ms before (ADR 50), a line waited 100 ms in the middle; pushed, a few.
    expect(delays[Math.floor(delays.length / 2)]!).toBeLessThan(50);
  });

  it('runs a background command, lists it, and kills it', async () => {
    const handle = await sandbox.commands.run('sleep 300', { background: true });
    expect(handle.pid).toBeGreaterThan(0);
    const listed = await sandbox.commands.list();
    expect(listed.map((process) => process.pid)).toContain(handle.pid);
    expect(listed.find((process) => process.pid === handle.pid)).toMatchObject({ cmd: '/bin/bash', args: ['-l', '-c', 'sleep 300'] });
    expect(await sandbox.commands.kill(handle.pid)).toBe(true);
    const ended = await handle.wait().catch((error: unknown) => error);
    expect(ended).toBeInstanceOf(CommandExitError);
    expect((await sandbox.commands.list()).map((process) => process.pid)).not.toContain(handle.pid);
    expect(await sandbox.commands.kill(999_999)).toBe(false);
  });

  it('keeps the stdin of a command started with stdin: true open: sendStdin reaches it, closeStdin ends it', async () => {
    const out: string[] = [];
    const handle = await sandbox.commands.run('cat; echo "eof $?"', { background: true, stdin: true, onStdout: (data) => void out.push(data) });
    await sandbox.commands.sendStdin(handle.pid, 'hello ');
    await handle.sendStdin(new TextEncoder().encode('world\n'));
    await eventually(async () => (out.join('') === 'hello world\n' ? true : undefined), { timeoutMs: 5_000 });
    await handle.closeStdin();
    const result = await handle.wait();
    expect(result).toMatchObject({ exitCode: 0, stdout: 'hello world\neof 0\n' });
    // Once the command ended its stdin is gone with it.
    await expect(sandbox.commands.sendStdin(handle.pid, 'late')).rejects.toBeInstanceOf(e2b.SandboxError);
  });

  it('closes the stdin of a command started without stdin: true, as envd does', async () => {
    expect((await sandbox.commands.run('cat; echo read-to-the-end')).stdout).toBe('read-to-the-end\n');
    const handle = await sandbox.commands.run('sleep 60', { background: true });
    const refused = await sandbox.commands.sendStdin(handle.pid, 'unread').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(e2b.SandboxError);
    expect(String(refused)).toMatch(/stdin/);
    await expect(sandbox.commands.closeStdin(handle.pid)).rejects.toBeInstanceOf(e2b.SandboxError);
    expect(await sandbox.commands.kill(handle.pid)).toBe(true);
  });

  it('opens a PTY: input, resize, output and its end', async () => {
    const output: Buffer[] = [];
    const terminal = await sandbox.pty.create({ cols: 80, rows: 24, onData: (data) => void output.push(Buffer.from(data)) });
    await sandbox.pty.resize(terminal.pid, { cols: 100, rows: 30 });
    await sandbox.pty.sendInput(terminal.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\nexit 0\n'));
    const result = await terminal.wait();
    expect(result.exitCode).toBe(0);
    const text = Buffer.concat(output).toString('utf8');
    expect(text).toContain('30 100');
    expect(text).toContain('pty-42');
  });

  it('kills a PTY', async () => {
    const terminal = await sandbox.pty.create({ cols: 80, rows: 24, onData: () => undefined });
    expect((await sandbox.commands.list()).map((process) => process.pid)).toContain(terminal.pid);
    expect(await sandbox.pty.kill(terminal.pid)).toBe(true);
    await expect(terminal.wait()).rejects.toBeInstanceOf(CommandExitError);
    expect((await sandbox.commands.list()).map((process) => process.pid)).not.toContain(terminal.pid);
  });

  it('connects again to a command it let go of, and follows it to its end', async () => {
    const handle = await sandbox.commands.run('for i in 1 2 3 4 5 6; do echo tick-$i; sleep 0.3; done', { background: true });
    await handle.disconnect();
    const seen: string[] = [];
    const again = await sandbox.commands.connect(handle.pid, { onStdout: (data) => void seen.push(data) });
    const result = await again.wait();
    expect(result.exitCode).toBe(0);
    expect(seen.join('')).toContain('tick-6\n');
  });

  it('stops following a command whose client went away, which runs on', async () => {
    const metric = async (name: string) => {
      const text = await (await fetch(`${berth.baseUrl}/metrics`)).text();
      return text.split('\n').filter((line) => line.startsWith(name)).reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
    };
    const handle = await sandbox.commands.run('sleep 60', { background: true });
    expect(await metric('berth_e2b_process_streams_open')).toBe(1);
    await eventually(async () => ((await metric('berth_e2b_process_follows_open')) === 1 ? true : undefined), { timeoutMs: 5_000 });
    await handle.disconnect();
    // The stream and the sandbox's follow both end; the command runs on.
    await eventually(async () => ((await metric('berth_e2b_process_streams_open')) === 0 ? true : undefined), { timeoutMs: 5_000 });
    expect(await metric('berth_e2b_process_follows_open')).toBe(0);
    expect((await sandbox.commands.list()).map((process) => process.pid)).toContain(handle.pid);
    expect(await sandbox.commands.kill(handle.pid)).toBe(true);
  });

  it('sets the timeout from now (only ever longer)', async () => {
    await sandbox.setTimeout(900_000);
    const info = await sandbox.getInfo();
    expect(Math.abs(info.endAt.getTime() - (Date.now() + 900_000))).toBeLessThan(15_000);
    const shorter = await raw('POST', `/e2b/sandboxes/${sandbox.sandboxId}/timeout`, { timeout: 30 });
    expect(shorter.status).toBe(400);
    expect(shorter.body).toMatchObject({ code: 400, message: expect.stringContaining('timeout') });
  });

  it('pauses with the memory kept: a background counter continues after connect', async () => {
    const counter = await sandbox.commands.run('i=0; while true; do i=$((i+1)); echo $i > /workspace/counter; sleep 0.2; done', { background: true });
    const readCounter = async (box: e2b.Sandbox) => Number((await box.commands.run('cat /workspace/counter')).stdout);
    await eventually(async () => ((await readCounter(sandbox)) >= 5 ? true : undefined), { timeoutMs: 20_000 });
    const before = await readCounter(sandbox);
    // A directory watch open across the pause ends with it (it is not resumed).
    let watchEnded: unknown = 'running';
    await sandbox.files.watchDir('/home/user', () => undefined, { timeoutMs: 0, onExit: (error) => void (watchEnded = error) });
    expect(await sandbox.pause()).toBe(true);
    expect((await Sandbox.getInfo(sandbox.sandboxId)).state).toBe('paused');
    await eventually(async () => (watchEnded !== 'running' ? true : undefined), { timeoutMs: 10_000, what: 'the watch ended by the pause' });
    expect(String(watchEnded)).toMatch(/watch ended/);

    const resumed = await Sandbox.connect(sandbox.sandboxId);
    expect((await resumed.getInfo()).state).toBe('running');
    // The same process with its memory: it counts on from where it was, not from 1 again.
    const atResume = await readCounter(resumed);
    expect(atResume).toBeGreaterThanOrEqual(before);
    await eventually(async () => ((await readCounter(resumed)) > atResume + 3 ? true : undefined), { timeoutMs: 20_000 });
    expect((await resumed.commands.list()).map((process) => process.pid)).toContain(counter.pid);

    // connect on a running sandbox: 200; on a paused one: 201 (resumed).
    const running = await raw('POST', `/e2b/sandboxes/${sandbox.sandboxId}/connect`, { timeout: 600 });
    expect(running.status).toBe(200);
    expect(running.body).toMatchObject({ sandboxID: sandbox.sandboxId, templateID: 'base', envdVersion: ENVD_VERSION, envdAccessToken: expect.any(String), domain: DOMAIN });
    expect((await raw('POST', `/e2b/sandboxes/${sandbox.sandboxId}/pause`, {})).status).toBe(204);
    expect((await raw('POST', `/e2b/sandboxes/${sandbox.sandboxId}/pause`, {})).status).toBe(409);
    const again = await raw('POST', `/e2b/v2/sandboxes/${sandbox.sandboxId}/connect`, { timeout: 600 });
    expect(again.status).toBe(201);
    expect(await resumed.commands.kill(counter.pid)).toBe(true);
  }, 180_000);

  it('lists sandboxes with filters and pages', async () => {
    const second = await Sandbox.create({ metadata: { suite: 'e2b-v2', second: 'yes' }, timeoutMs: 300_000 });
    const found = await Sandbox.list({ query: { metadata: { suite: 'e2b-v2' } } }).nextItems();
    expect(found.map((item) => item.sandboxId).sort()).toEqual([sandbox.sandboxId, second.sandboxId].sort());
    const onlySecond = await Sandbox.list({ query: { metadata: { second: 'yes' }, state: ['running'] } }).nextItems();
    expect(onlySecond.map((item) => item.sandboxId)).toEqual([second.sandboxId]);
    // One per page: the paginator follows x-next-token.
    const paginator = Sandbox.list({ limit: 1 });
    const first = await paginator.nextItems();
    expect(first).toHaveLength(1);
    expect(paginator.hasNext).toBe(true);
    // Without berth-user, a sandbox goes in the key's own session.
    const agent = await berth.api(key).get(`/v1/agents/agt_${second.sandboxId}`);
    expect((await berth.api(key).get(`/v1/sessions/${agent.body.sessionId}`)).body.userId).toMatch(/^e2b-key-key_/);
    await second.kill();
  }, 120_000);

  it('writes, reads, lists, renames and removes files under /home/user, which is the workspace', async () => {
    const written = await sandbox.files.write('/home/user/notes/a.txt', 'hello from e2b\n');
    expect(written).toMatchObject({ name: 'a.txt', path: '/home/user/notes/a.txt' });
    expect(await sandbox.files.read('/home/user/notes/a.txt')).toBe('hello from e2b\n');
    // A relative path is under the home too; a command sees it in /workspace.
    expect(await sandbox.files.read('notes/a.txt')).toBe('hello from e2b\n');
    expect((await sandbox.commands.run('cat /workspace/notes/a.txt')).stdout).toBe('hello from e2b\n');
    const bytes = Uint8Array.from([0, 1, 2, 254, 255]);
    await sandbox.files.write('notes/bin.dat', bytes.buffer as ArrayBuffer);
    expect(Array.from(await sandbox.files.read('notes/bin.dat', { format: 'bytes' }))).toEqual(Array.from(bytes));

    expect(await sandbox.files.makeDir('/home/user/notes/deep/er')).toBe(true);
    expect(await sandbox.files.makeDir('/home/user/notes/deep/er')).toBe(false);
    await sandbox.files.write('/home/user/notes/deep/er/c.txt', 'c');
    const top = await sandbox.files.list('/home/user/notes');
    expect(top.map((entry) => [entry.name, entry.type]).sort()).toEqual([
      ['a.txt', 'file'],
      ['bin.dat', 'file'],
      ['deep', 'dir'],
    ]);
    const a = top.find((entry) => entry.name === 'a.txt')!;
    expect(a).toMatchObject({ path: '/home/user/notes/a.txt', size: 15, permissions: '-rw-r--r--' });
    expect(a.modifiedTime).toBeInstanceOf(Date);
    const deep = await sandbox.files.list('/home/user/notes', { depth: 3 });
    expect(deep.map((entry) => entry.path).sort()).toEqual(
      ['a.txt', 'bin.dat', 'deep', 'deep/er', 'deep/er/c.txt'].map((name) => `/home/user/notes/${name}`),
    );

    expect(await sandbox.files.exists('/home/user/notes/a.txt')).toBe(true);
    const renamed = await sandbox.files.rename('/home/user/notes/a.txt', '/home/user/notes/b.txt');
    expect(renamed).toMatchObject({ name: 'b.txt', path: '/home/user/notes/b.txt', type: 'file' });
    expect(await sandbox.files.exists('/home/user/notes/a.txt')).toBe(false);
    await sandbox.files.remove('/home/user/notes/deep');
    expect(await sandbox.files.exists('/home/user/notes/deep/er/c.txt')).toBe(false);
    await expect(sandbox.files.read('/home/user/notes/nothing.txt')).rejects.toBeInstanceOf(e2b.FileNotFoundError);
    await expect(sandbox.files.list('/home/user/notes/nothing')).rejects.toBeInstanceOf(e2b.FileNotFoundError);
  }, 120_000);

  it("shares the files with Berth's own files API both ways", async () => {
    await sandbox.files.write('/home/user/shared/from-e2b.txt', 'written by the SDK');
    const viaBerth = await fetch(`${berth.baseUrl}/v1/agents/agt_${sandbox.sandboxId}/files?path=shared/from-e2b.txt`, { headers: { authorization: `Bearer ${key}` } });
    expect(viaBerth.status).toBe(200);
    expect(await viaBerth.text()).toBe('written by the SDK');
    const upload = await fetch(`${berth.baseUrl}/v1/agents/agt_${sandbox.sandboxId}/files?path=shared/from-berth.txt`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' },
      body: 'written by Berth',
    });
    expect(upload.status).toBe(201);
    expect(await sandbox.files.read('/home/user/shared/from-berth.txt')).toBe('written by Berth');
    // Several files at once: one multipart body, each part named by its path.
    const many = await sandbox.files.write([
      { path: '/home/user/shared/one.txt', data: '1' },
      { path: 'shared/two.txt', data: '22' },
    ]);
    expect(many.map((entry) => entry.path)).toEqual(['/home/user/shared/one.txt', '/home/user/shared/two.txt']);
    expect(await sandbox.files.read('/home/user/shared/two.txt')).toBe('22');
  }, 60_000);

  it('refuses paths outside the workspace, and links that lead out of it', async () => {
    for (const path of ['/etc/passwd', '/home/user/../../etc/passwd', '../etc/passwd', '/tmp/x']) {
      const read = await sandbox.files.read(path).catch((error: unknown) => error);
      expect(read, path).toBeInstanceOf(e2b.SandboxError);
      expect(String(read), path).toMatch(/outside the sandbox's files/);
    }
    const write = await sandbox.files.write('/etc/evil', 'x').catch((error: unknown) => error);
    expect(String(write)).toMatch(/outside the sandbox's files/);
    const list = await sandbox.files.list('/').catch((error: unknown) => error);
    expect(String(list)).toMatch(/outside the sandbox's files/);
    await sandbox.commands.run('ln -sfn /etc /workspace/etc-link');
    const followed = await sandbox.files.read('/home/user/etc-link/passwd').catch((error: unknown) => error);
    expect(followed).toBeInstanceOf(e2b.SandboxError);
    expect(String(followed)).not.toMatch(/root:/);
    expect((await sandbox.commands.run('cat /etc/hostname')).exitCode).toBe(0);
    for (const path of ['/etc', '/home/user/..', '/home/user/etc-link']) {
      const watch = await sandbox.files.watchDir(path, () => undefined).catch((error: unknown) => error);
      expect(watch, path).toBeInstanceOf(e2b.SandboxError);
      expect(String(watch), path).toMatch(/outside/);
    }
  }, 60_000);

  it('watches a directory: a write, a create in a subdirectory (recursive), a rename and a remove arrive by name and type, until stopped', async () => {
    await sandbox.files.makeDir('/home/user/watched/sub');
    const events: string[] = [];
    let exited: unknown = 'running';
    const handle = await sandbox.files.watchDir('/home/user/watched', (event) => void events.push(`${event.type} ${event.name}`), {
      recursive: true,
      timeoutMs: 0,
      onExit: (error) => void (exited = error),
    });
    await sandbox.files.write('/home/user/watched/a.txt', 'a');
    await sandbox.commands.run('mkdir -p /workspace/watched/sub/new && echo b > /workspace/watched/sub/new/b.txt && echo more >> /workspace/watched/a.txt');
    await sandbox.files.rename('/home/user/watched/a.txt', '/home/user/watched/c.txt');
    await sandbox.files.remove('/home/user/watched/c.txt');
    await eventually(async () => (events.includes('remove c.txt') ? true : undefined), { timeoutMs: 15_000, what: `the remove among ${events.join(', ')}` });
    expect(events).toEqual(expect.arrayContaining(['create a.txt', 'write a.txt', 'create sub/new', 'create sub/new/b.txt', 'rename a.txt', 'create c.txt', 'remove c.txt']));
    // The upload's rename into place is the path's own change; its file beside the path is never told.
    expect(events.filter((event) => event.includes('berth-upload'))).toEqual([]);
    expect(events.indexOf('create a.txt')).toBeLessThan(events.indexOf('rename a.txt'));
    expect(exited).toBe('running');
    await handle.stop();
    const seen = events.length;
    await sandbox.files.write('/home/user/watched/after.txt', 'x');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(events.length).toBe(seen);
    // The SDK ends its own stream by aborting it, and says so to onExit.
    expect(String(exited)).toMatch(/canceled|aborted/);
    // A file is not a directory to watch; what is not there is not found.
    await expect(sandbox.files.watchDir('/home/user/watched/after.txt', () => undefined)).rejects.toBeInstanceOf(e2b.InvalidArgumentError);
    await expect(sandbox.files.watchDir('/home/user/nothing', () => undefined)).rejects.toBeInstanceOf(e2b.FileNotFoundError);
    // The polling watchers (the Python SDK's sync watch_dir) by hand: an entry per event is refused rather than left out.
    const { envdAccessToken } = (await raw('GET', `/e2b/sandboxes/${sandbox.sandboxId}`)).body;
    const envd = async (method: string, message: unknown) => {
      const response = await fetch(`${berth.baseUrl}/filesystem.Filesystem/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'e2b-sandbox-id': sandbox.sandboxId, 'e2b-sandbox-port': '49983', 'x-access-token': envdAccessToken },
        body: JSON.stringify(message),
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    expect(await envd('CreateWatcher', { path: '/home/user/watched', includeEntry: true })).toMatchObject({ status: 501, body: { code: 'unimplemented', message: expect.stringContaining('includeEntry') } });
    const created = await envd('CreateWatcher', { path: '/home/user/watched' });
    expect(created.status).toBe(200);
    await sandbox.files.write('/home/user/watched/polled.txt', 'p');
    const polled: string[] = [];
    await eventually(async () => {
      const answer = await envd('GetWatcherEvents', { watcher_id: created.body.watcherId });
      polled.push(...answer.body.events.map((event: { name: string; type: string }) => `${event.type} ${event.name}`));
      return polled.includes('EVENT_TYPE_WRITE polled.txt') ? true : undefined;
    });
    expect(polled).toEqual(['EVENT_TYPE_CREATE polled.txt', 'EVENT_TYPE_WRITE polled.txt']);
    expect(await envd('RemoveWatcher', { watcherId: created.body.watcherId })).toEqual({ status: 200, body: {} });
    expect(await envd('GetWatcherEvents', { watcherId: created.body.watcherId })).toMatchObject({ status: 404, body: { code: 'not_found' } });
  }, 60_000);

  it("reaches a port in the sandbox through getHost, and through the E2b-Sandbox-Port header, with the sandbox's traffic token", async () => {
    await sandbox.files.write('/home/user/site/hello.txt', 'hello through the tunnel');
    await sandbox.commands.run('python3 -m http.server 8000 --bind 127.0.0.1 --directory /workspace/site', { background: true });
    const token = sandbox.trafficAccessToken!;
    expect(token).toEqual(expect.any(String));
    const host = sandbox.getHost(8000);
    expect(host).toBe(`8000-${sandbox.sandboxId}.${DOMAIN}`);
    const byHost = await eventually(
      async () => {
        const response = await fetch(`https://${host}/hello.txt`, { headers: { 'e2b-traffic-access-token': token } });
        return response.status === 200 ? response : undefined;
      },
      { timeoutMs: 20_000 },
    );
    expect(await byHost.text()).toBe('hello through the tunnel');
    const byHeader = await fetch(`${berth.baseUrl}/hello.txt`, { headers: { 'e2b-sandbox-id': sandbox.sandboxId, 'e2b-sandbox-port': '8000', 'e2b-traffic-access-token': token } });
    expect(byHeader.status).toBe(200);
    expect(await byHeader.text()).toBe('hello through the tunnel');
    const listing = await fetch(`https://${host}/`, { headers: { 'x-access-token': token } });
    expect(await listing.text()).toContain('hello.txt');

    const anonymous = await fetch(`https://${host}/hello.txt`);
    expect(anonymous.status).toBe(401);
    const closed = await fetch(`https://${sandbox.getHost(8001)}/`, { headers: { 'e2b-traffic-access-token': token } });
    expect(closed.status).toBe(503);
    expect(await closed.json()).toMatchObject({ code: 503, message: expect.stringContaining('nothing listens on port 8001') });
  }, 60_000);

  it('passes a WebSocket to a port in the sandbox, by host name and by header', async () => {
    await sandbox.files.write('/home/user/ws_echo.py', readFileSync(join(ROOT, 'test/e2b/ws_echo.py'), 'utf8'));
    await sandbox.commands.run('python3 /workspace/ws_echo.py 8765', { background: true });
    const token = sandbox.trafficAccessToken!;
    const echo = (url: string, headers: Record<string, string>) =>
      new Promise<string>((resolve, reject) => {
        const socket = new WebSocket(url, { headers });
        socket.once('open', () => socket.send('ping through the tunnel'));
        socket.once('message', (data) => {
          resolve(String(data));
          socket.close();
        });
        socket.once('error', reject);
        socket.once('unexpected-response', (_request, response) => reject(new Error(`answered ${response.statusCode}`)));
      });
    const byHeader = await eventually(
      async () => echo(berth.baseUrl.replace(/^http/, 'ws') + '/', { 'e2b-sandbox-id': sandbox.sandboxId, 'e2b-sandbox-port': '8765', 'e2b-traffic-access-token': token }).catch(() => undefined),
      { timeoutMs: 20_000 },
    );
    expect(byHeader).toBe('ping through the tunnel');
    // The host name, as getHost names it, over plain HTTP to berth up (the Host header routes it).
    const byHost = await echo(berth.baseUrl.replace(/^http/, 'ws') + '/', { host: sandbox.getHost(8765), 'e2b-traffic-access-token': token });
    expect(byHost).toBe('ping through the tunnel');
    await expect(echo(berth.baseUrl.replace(/^http/, 'ws') + '/', { host: sandbox.getHost(8765) })).rejects.toThrow('answered 401');
  }, 60_000);

  it('guards the envd routes with the access token and answers E2B errors on the control plane', async () => {
    const list = (token: string) =>
      fetch(`${berth.baseUrl}/process.Process/List`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'e2b-sandbox-id': sandbox.sandboxId, 'e2b-sandbox-port': '49983', 'x-access-token': token },
        body: '{}',
      });
    const refused = await list('envd_nope.nope');
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ code: 'unauthenticated' });
    const health = await fetch(`${berth.baseUrl}/health`, { headers: { 'e2b-sandbox-id': sandbox.sandboxId } });
    expect(health.status).toBe(204);

    const wrongKey = await Sandbox.create({ apiKey: 'e2b_svc_live_nope' }).catch((error: unknown) => error);
    expect(wrongKey).toBeInstanceOf(e2b.AuthenticationError);
    const missing = await raw('GET', '/e2b/sandboxes/0000000000000000000000000');
    expect(missing).toEqual({ status: 404, body: { code: 404, message: expect.stringContaining('not found') } });
    const unknownTemplate = await Sandbox.create('no-such-template').catch((error: unknown) => error);
    expect(String(unknownTemplate)).toMatch(/template "no-such-template" not found/);
    const envVars = await raw('POST', '/e2b/v2/sandboxes', { templateID: 'base', envVars: { A: '1' } });
    expect(envVars).toEqual({ status: 400, body: { code: 400, message: expect.stringContaining('envVars') } });
  });

  it('kills the sandbox: its agent ends, and a second kill finds nothing', async () => {
    const id = sandbox.sandboxId;
    await sandbox.kill();
    expect(await Sandbox.kill(id)).toBe(false);
    await expect(Sandbox.getInfo(id)).rejects.toBeInstanceOf(e2b.SandboxNotFoundError);
    await eventually(async () => (['terminated'].includes((await berth.api(key).get(`/v1/agents/agt_${id}`)).body.status) ? true : undefined), { timeoutMs: 30_000 });
  }, 60_000);
});

describe('the last 1.x SDK (e2b 1.13) through E2B_DOMAIN: api.<domain> and <port>-<sandboxId>.<domain>', () => {
  const { Sandbox, CommandExitError } = e2bV1;
  // 1.x always asks for internet access unless told otherwise; sandboxes here have none.
  const options = { domain: DOMAIN, apiKey: `e2b_${'' as string}`, allowInternetAccess: false };
  let sandbox: e2bV1.Sandbox;

  beforeAll(async () => {
    options.apiKey = `e2b_${key}`;
    sandbox = await Sandbox.create('base', { ...options, metadata: { suite: 'e2b-v1' }, timeoutMs: 300_000 });
  }, 120_000);

  it('writes, reads, lists and removes files (multipart uploads through the host name)', async () => {
    await sandbox.files.write('/home/user/v1/a.txt', 'from 1.x');
    expect(await sandbox.files.read('/home/user/v1/a.txt')).toBe('from 1.x');
    expect((await sandbox.files.list('/home/user/v1')).map((entry) => entry.name)).toEqual(['a.txt']);
    expect(await sandbox.files.exists('v1/a.txt')).toBe(true);
    expect(await sandbox.files.makeDir('/home/user/v1/d')).toBe(true);
    await sandbox.files.rename('/home/user/v1/a.txt', '/home/user/v1/d/b.txt');
    expect(await sandbox.files.read('/home/user/v1/d/b.txt')).toBe('from 1.x');
    await sandbox.files.remove('/home/user/v1');
    expect(await sandbox.files.exists('/home/user/v1')).toBe(false);
    await expect(sandbox.files.read('/etc/passwd')).rejects.toThrow(/outside the sandbox's files/);
  }, 60_000);

  it('watches a directory, recursively, until stopped; nothing outside the workspace', async () => {
    await sandbox.files.makeDir('/home/user/v1w');
    const events: string[] = [];
    const handle = await sandbox.files.watchDir('/home/user/v1w', (event) => void events.push(`${event.type} ${event.name}`), { recursive: true, timeoutMs: 0 });
    await sandbox.commands.run('mkdir /workspace/v1w/d');
    // Once the new directory is told, it is watched too.
    await eventually(async () => (events.includes('create d') ? true : undefined), { timeoutMs: 15_000, what: 'the new directory' });
    await sandbox.commands.run(': > /workspace/v1w/d/f && mv /workspace/v1w/d/f /workspace/v1w/g && rm /workspace/v1w/g');
    await eventually(async () => (events.includes('remove g') ? true : undefined), { timeoutMs: 15_000, what: `the remove among ${events.join(', ')}` });
    expect(events).toEqual(['create d', 'create d/f', 'rename d/f', 'create g', 'remove g']);
    await handle.stop();
    await expect(sandbox.files.watchDir('/etc', () => undefined)).rejects.toThrow(/outside the sandbox's files/);
  }, 60_000);

  it('creates, runs commands with callbacks and exit codes, background and kill, a PTY, setTimeout, list and kill', async () => {
    const out: string[] = [];
    const result = await sandbox.commands.run('echo v1-out; echo v1-err >&2', { onStdout: (data) => void out.push(data) });
    expect(result).toMatchObject({ exitCode: 0, stdout: 'v1-out\n', stderr: 'v1-err\n' });
    expect(out.join('')).toBe('v1-out\n');
    const failed = await sandbox.commands.run('exit 4').catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(CommandExitError);
    expect((failed as e2bV1.CommandExitError).exitCode).toBe(4);

    const handle = await sandbox.commands.run('sleep 300', { background: true });
    expect((await sandbox.commands.list()).map((process) => process.pid)).toContain(handle.pid);
    expect(await sandbox.commands.kill(handle.pid)).toBe(true);
    await expect(handle.wait()).rejects.toBeInstanceOf(CommandExitError);

    const output: Buffer[] = [];
    const terminal = await sandbox.pty.create({ cols: 80, rows: 24, onData: (data) => void output.push(Buffer.from(data)) });
    await sandbox.pty.sendInput(terminal.pid, new TextEncoder().encode('echo v1-pty-$((6*7)); exit 0\n'));
    expect((await terminal.wait()).exitCode).toBe(0);
    expect(Buffer.concat(output).toString('utf8')).toContain('v1-pty-42');

    await sandbox.setTimeout(600_000);
    const info = await sandbox.getInfo();
    expect(Math.abs(new Date(info.endAt).getTime() - (Date.now() + 600_000))).toBeLessThan(15_000);

    const listed = await Sandbox.list({ ...options, query: { metadata: { suite: 'e2b-v1' } } });
    expect(listed.map((item) => item.sandboxId)).toEqual([sandbox.sandboxId]);

    const connected = await Sandbox.connect(sandbox.sandboxId, options);
    expect((await connected.commands.run('echo again')).stdout).toBe('again\n');

    await sandbox.kill();
    expect(await Sandbox.kill(sandbox.sandboxId, options)).toBe(false);
  }, 120_000);

  it('is refused internet access rather than given a sandbox without it silently', async () => {
    const refused = await Sandbox.create('base', { domain: DOMAIN, apiKey: `e2b_${key}` }).catch((error: unknown) => error);
    expect(String(refused)).toMatch(/allow_internet_access/);
  });
});

describe('allowInternetAccess on an install with a default egress allow-list (BERTH_EGRESS_ALLOW)', () => {
  let withEgress: BerthProcess;
  let egressKey: string;

  beforeAll(async () => {
    withEgress = await startBerth({ env: { DATABASE_URL: await createTestDatabase(), BERTH_EGRESS_ALLOW: 'pypi.org' } });
    egressKey = withEgress.liveKey!;
  }, 120_000);
  afterAll(async () => {
    const code = await withEgress.stop();
    expect(code, withEgress.stderr().slice(-4000)).toBe(0);
    removeDataDir(withEgress.dataDir);
  });

  async function create(allowInternetAccess: boolean | undefined) {
    const response = await fetch(`${withEgress.baseUrl}/e2b/v2/sandboxes`, {
      method: 'POST',
      headers: { 'x-api-key': `e2b_${egressKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ templateID: 'base', timeout: 120, ...(allowInternetAccess === undefined ? {} : { allow_internet_access: allowInternetAccess }) }),
    });
    expect(response.status).toBe(201);
    const { sandboxID } = (await response.json()) as { sandboxID: string };
    const agent = await withEgress.api(egressKey).get(`/v1/agents/agt_${sandboxID}`);
    await fetch(`${withEgress.baseUrl}/e2b/sandboxes/${sandboxID}`, { method: 'DELETE', headers: { 'x-api-key': egressKey } });
    return agent.body.egress as { hosts: string[]; cidrs: string[] } | undefined;
  }

  it("gives true the install's allow-list, and false no network even where the default would apply", async () => {
    expect(await create(true)).toMatchObject({ hosts: ['pypi.org'], cidrs: [] });
    expect(await create(undefined)).toMatchObject({ hosts: ['pypi.org'], cidrs: [] });
    expect(await create(false)).toMatchObject({ hosts: [], cidrs: [] });
  }, 120_000);
});

describe('the Python SDK (PyPI e2b 2.63) through the same environment', () => {
  it('creates a sandbox, runs commands (a non-zero exit as CommandExitException, stdin sent and closed), writes, reads and watches files, and kills it', async () => {
    const python = execFileSync(join(ROOT, 'test/e2b/install-python-sdk.sh'), { encoding: 'utf8' }).trim();
    const child = spawn(python, [join(ROOT, 'test/e2b/python_smoke.py')], {
      env: { ...process.env, E2B_API_URL: `${berth.baseUrl}/e2b`, E2B_SANDBOX_URL: berth.baseUrl, E2B_API_KEY: `e2b_${key}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code, stderr).toBe(0);
    const result = JSON.parse(stdout);
    expect(result).toMatchObject({ templateId: 'base', stdout: 'py-out\n', stderr: 'py-err\n', exitCode: 0, failedExitCode: 5, fromStdin: 'from python stdin\n', readBack: 'from python', listed: ['hello.txt'], exists: true, watched: ['create watched.txt', 'write watched.txt'], killed: true, killedAgain: false });
    expect((await berth.api(key).get(`/v1/agents/agt_${result.sandboxId}`)).body.metadata).toMatchObject({ suite: 'e2b-python' });
  }, 180_000);
});
