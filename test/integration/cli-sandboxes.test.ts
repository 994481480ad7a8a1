import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BERTH_BIN, startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { eventually } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * The client commands of `berth` (docs/cli.md, ADR 43) against a real `berth up` with gVisor
 * sandboxes: login and its config file, agents create|list|get|exec|shell|files|pause|resume|terminate
 * and run, with --json parsed, no colours off a terminal, and exec and shell driven through a
 * real terminal (tmux).
 */
let berth: BerthProcess;
let home: string;
let agentId: string;
const ESC = '\u001b[';
const TMUX_SOCKET = `berth-cli-test-${process.pid}`;

/** The environment of a user who ran `berth login`: no URL or key in it, only the config file's place. */
function userEnv(extra: Record<string, string> = {}): Record<string, string> {
  const { BERTH_URL: _u, BERTH_API_KEY: _k, NO_COLOR: _n, FORCE_COLOR: _f, ...rest } = process.env as Record<string, string>;
  return { ...rest, BERTH_CONFIG: join(home, 'config.json'), ...extra };
}

/** Runs `berth` with pipes (not a terminal): exit code and output. */
function cli(args: string[], options: { env?: Record<string, string>; input?: string | Buffer } = {}): Promise<{ code: number | null; stdout: string; stderr: string; bytes: Buffer }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(BERTH_BIN, '..', '..', '..', 'bin', 'berth.js'), ...args], { env: options.env ?? userEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.end(options.input ?? '');
    child.on('close', (code) => {
      const bytes = Buffer.concat(chunks);
      resolve({ code, stdout: bytes.toString(), stderr, bytes });
    });
  });
}

function tmux(...args: string[]): string {
  return execFileSync('tmux', ['-L', TMUX_SOCKET, ...args], { encoding: 'utf8' });
}

const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** Starts `berth <args>` in a new tmux window of its own (a real terminal), then prints its exit code and waits. */
function inTerminal(name: string, args: string[], env: Record<string, string> = {}, size = { cols: 100, rows: 30 }): void {
  const assignments = Object.entries({ BERTH_CONFIG: join(home, 'config.json'), ...env }).map(([key, value]) => `${key}=${quote(value)}`);
  const command = `env -u BERTH_URL -u BERTH_API_KEY -u NO_COLOR ${assignments.join(' ')} ${quote(process.execPath)} ${quote(join(BERTH_BIN, '..', '..', '..', 'bin', 'berth.js'))} ${args.map(quote).join(' ')}; echo "EXIT=$?"; sleep 600`;
  tmux('new-session', '-d', '-s', name, '-x', String(size.cols), '-y', String(size.rows), command);
}

function screen(name: string, escapes = false): string {
  return tmux('capture-pane', '-p', ...(escapes ? ['-e'] : []), '-J', '-S', '-200', '-t', name);
}

function untilScreen(name: string, pattern: RegExp, timeoutMs = 30_000): Promise<string> {
  return eventually(async () => {
    const text = screen(name);
    return pattern.test(text) ? text : undefined;
  }, { timeoutMs, intervalMs: 100, what: `${pattern} on the terminal ${name}` }).catch((error: Error) => {
    throw new Error(`${error.message}\n--- screen ---\n${screen(name)}`);
  });
}

beforeAll(async () => {
  home = tempDir('berth-cli-home-');
  berth = await startBerth({ env: { DATABASE_URL: await createTestDatabase() } });
});
afterAll(async () => {
  try {
    tmux('kill-server');
  } catch {
    // no session was left
  }
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
});

describe('berth login and the config file', () => {
  it('refuses a key the server does not know, and writes nothing', async () => {
    const result = await cli(['login', '--url', berth.baseUrl, '--key', 'svc_live_wrong']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('auth/invalid_key');
    expect(existsSync(join(home, 'config.json'))).toBe(false);
  });

  it('checks the key, then saves the URL and key readable by the owner only', async () => {
    const result = await cli(['login', '--url', berth.baseUrl, '--key', berth.liveKey!, '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ ok: true, url: berth.baseUrl, config: join(home, 'config.json') });
    expect(JSON.parse(readFileSync(join(home, 'config.json'), 'utf8'))).toEqual({ url: berth.baseUrl, apiKey: berth.liveKey });
    expect(statSync(join(home, 'config.json')).mode & 0o777).toBe(0o600);
  });

  it('says how to log in when nothing names a server, with exit code 2', async () => {
    const result = await cli(['agents', 'list'], { env: userEnv({ BERTH_CONFIG: join(home, 'absent.json') }) });
    expect(result).toMatchObject({ code: 2, stderr: expect.stringContaining('berth login --url') });
  });
});

describe('berth agents', () => {
  it('creates an agent and waits until it is idle (--json)', async () => {
    const result = await cli(['agents', 'create', '--user', 'cli-user', '--timeout', '1h', '--json']);
    expect(result.code, result.stderr).toBe(0);
    const agent = JSON.parse(result.stdout);
    expect(agent).toMatchObject({ id: expect.stringMatching(/^agt_/), status: 'idle', timeout: '1h' });
    agentId = agent.id;
  });

  it('lists agents as JSON, and as a table without colours when stdout is not a terminal', async () => {
    const json = await cli(['agents', 'list', '--json']);
    expect(JSON.parse(json.stdout).map((agent: { id: string }) => agent.id)).toContain(agentId);
    const text = await cli(['agents', 'list', '--status', 'idle']);
    expect(text.code).toBe(0);
    expect(text.stdout.split('\n')[0]).toMatch(/^ID\s+STATUS\s+COMPUTE\s+SESSION\s+CREATED$/);
    expect(text.stdout).toContain(`${agentId}  idle`);
    expect(text.stdout + text.stderr).not.toContain(ESC);
  });

  it('execs with the API result as JSON, code from stdin, env, cwd and the exit code passed on', async () => {
    const json = await cli(['agents', 'exec', agentId, '--language', 'python', '--json', '--', 'print(6 * 7)']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ stdout: '42\n', stderr: '', exitCode: 0, durationMs: expect.any(Number) });
    const piped = await cli(['agents', 'exec', agentId, '-l', 'python', '--env', 'WHO=cli', '--', '-'], { input: 'import os\nprint(os.environ["WHO"])\n' });
    expect(piped).toMatchObject({ code: 0, stdout: 'cli\n' });
    // After `--` every word is the program's, flags of berth's own included.
    expect(await cli(['agents', 'exec', agentId, '--', 'echo', '--help', '--json'])).toMatchObject({ code: 0, stdout: '--help --json\n' });
    expect(await cli(['agents', 'exec', agentId, '--', 'mkdir -p /workspace/sub'])).toMatchObject({ code: 0 });
    const failing = await cli(['agents', 'exec', agentId, '--cwd', 'sub', '--', 'pwd; echo err >&2; exit 7']);
    expect(failing).toMatchObject({ code: 7, stdout: '/workspace/sub\n', stderr: 'err\n' });
  });

  it('answers errors with the envelope under --json and exit code 1; usage mistakes with 2', async () => {
    const missing = await cli(['agents', 'get', 'agt_missing', '--json']);
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout)).toMatchObject({ status: 404, error: { code: 'not_found', requestId: expect.any(String) } });
    expect(missing.stderr).toContain('not_found');
    expect(missing.stderr).not.toContain(ESC);
    expect(await cli(['agents', 'exec', agentId])).toMatchObject({ code: 2, stderr: expect.stringContaining('usage: berth agents exec') });
    expect(await cli(['agents', 'exec', agentId, '--language', 'ruby', 'puts 1'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--language is one of') });
    expect(await cli(['agents', 'list', '--bogus'])).toMatchObject({ code: 2 });
  });

  it('exec on a real terminal: output as it comes, then the exit code', async () => {
    inTerminal('exec', ['agents', 'exec', agentId, '--', 'for i in 1 2 3; do echo line $i; sleep 0.4; done; exit 4']);
    const first = await untilScreen('exec', /line 1/);
    expect(first).not.toContain('EXIT=');
    const text = await untilScreen('exec', /EXIT=\d+/);
    expect(text).toMatch(/line 1\nline 2\nline 3\nEXIT=4/);
  });

  it('colours a table on a terminal, and not with NO_COLOR', async () => {
    inTerminal('colour', ['agents', 'list']);
    await untilScreen('colour', /EXIT=0/);
    expect(screen('colour', true)).toContain(ESC);
    inTerminal('plain', ['agents', 'list'], { NO_COLOR: '1' });
    await untilScreen('plain', /EXIT=0/);
    expect(screen('plain', true).replace(/\u001b\[(0|39|49|m)m?/g, '')).not.toMatch(/\u001b\[(1|2|3\d);?/);
  });

  it('shell: python3 on a terminal in the sandbox, typed into, resized with the window, its exit code passed on', async () => {
    inTerminal('shell', ['agents', 'shell', agentId, '--', 'python3', '-q'], {}, { cols: 100, rows: 30 });
    await untilScreen('shell', />>> $/m);
    tmux('send-keys', '-t', 'shell', 'import shutil; print(6 * 7, shutil.get_terminal_size())', 'Enter');
    await untilScreen('shell', /42 os\.terminal_size\(columns=100, lines=30\)/);
    tmux('resize-window', '-t', 'shell', '-x', '120', '-y', '40');
    // The resize (SIGWINCH to the CLI, then a message to the sandbox) and the keys typed next travel
    // apart: a print that overtakes the resize shows the old size, so it is typed again until the
    // sandbox's terminal has the new one.
    await eventually(
      async () => {
        tmux('send-keys', '-t', 'shell', 'print(shutil.get_terminal_size())', 'Enter');
        return untilScreen('shell', /os\.terminal_size\(columns=120, lines=40\)/, 2_000).catch(() => undefined);
      },
      { timeoutMs: 30_000, intervalMs: 0, what: 'the resized terminal in the sandbox' },
    );
    tmux('send-keys', '-t', 'shell', 'exit(3)', 'Enter');
    await untilScreen('shell', /EXIT=3/);
  });

  it('files: put from a local file and stdin, ls as a table and --json, get to a file and stdout with the same SHA-256, mkdir, rm', async () => {
    const dir = tempDir('berth-cli-files-');
    const bytes = randomBytes(3 * 1024 * 1024 + 17);
    const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');
    writeFileSync(join(dir, 'blob.bin'), bytes);
    const put = await cli(['agents', 'files', agentId, 'put', join(dir, 'blob.bin'), 'up/blob.bin', '--parents', '--json']);
    expect(put.code, put.stderr).toBe(0);
    expect(JSON.parse(put.stdout)).toMatchObject({ path: '/workspace/up/blob.bin', type: 'file', size: bytes.length, mode: 0o644 });
    const piped = await cli(['agents', 'files', agentId, 'put', '-', 'up/notes.txt', '--mode', '600'], { input: 'from stdin\n' });
    expect(piped).toMatchObject({ code: 0, stdout: '/workspace/up/notes.txt  11\n' });

    const listed = await cli(['agents', 'files', agentId, 'ls', 'up', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const listing = JSON.parse(listed.stdout);
    expect(listing.path).toBe('/workspace/up');
    expect(listing.data.map((entry: { name: string; size: number; mode: number }) => [entry.name, entry.size, entry.mode])).toEqual([['blob.bin', bytes.length, 0o644], ['notes.txt', 11, 0o600]]);
    const table = await cli(['agents', 'files', agentId, 'ls', 'up']);
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^MODE\s+SIZE\s+MODIFIED\s+NAME$/);
    expect(table.stdout).toMatch(/^0644\s+3\.0M\s+\S+\s+blob\.bin$/m);
    expect(table.stdout).toMatch(/^0600\s+11\s+\S+\s+notes\.txt$/m);
    expect(table.stdout).not.toContain(ESC);

    const got = await cli(['agents', 'files', agentId, 'get', 'up/blob.bin', join(dir, 'copy.bin')]);
    expect(got.code, got.stderr).toBe(0);
    expect(sha(readFileSync(join(dir, 'copy.bin')))).toBe(sha(bytes));
    expect(existsSync(join(dir, 'copy.bin.berth-partial'))).toBe(false);
    const toStdout = await cli(['agents', 'files', agentId, 'get', '/workspace/up/blob.bin']);
    expect(toStdout.code, toStdout.stderr).toBe(0);
    expect(sha(toStdout.bytes)).toBe(sha(bytes));
    expect(await cli(['agents', 'files', agentId, 'get', 'up/notes.txt', '-'])).toMatchObject({ code: 0, stdout: 'from stdin\n' });

    expect(await cli(['agents', 'files', agentId, 'mkdir', 'up/a/b', '-p'])).toMatchObject({ code: 0, stdout: '/workspace/up/a/b\n' });
    const notEmpty = await cli(['agents', 'files', agentId, 'rm', 'up', '--json']);
    expect(notEmpty.code).toBe(1);
    expect(JSON.parse(notEmpty.stdout)).toMatchObject({ status: 409, error: { code: 'conflict' } });
    expect(await cli(['agents', 'files', agentId, 'rm', 'up', '-r'])).toMatchObject({ code: 0, stdout: '' });
    const missing = await cli(['agents', 'files', agentId, 'get', 'up/blob.bin', join(dir, 'gone.bin')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('not_found');
    expect(existsSync(join(dir, 'gone.bin'))).toBe(false);
    expect((await cli(['agents', 'files', agentId, 'get', '../etc/passwd'])).stderr).toContain('unprocessable_entity');

    // Mistakes of the caller: exit code 2, nothing sent.
    expect((await cli(['agents', 'files', agentId, 'rm', 'x', '--mode', '644'])).code).toBe(2);
    expect((await cli(['agents', 'files', agentId, 'put', join(dir, 'absent.bin'), 'x'])).code).toBe(2);
    expect((await cli(['agents', 'files', agentId, 'cat', 'x'])).code).toBe(2);
  });

  it('pauses, resumes and terminates (--json)', async () => {
    const paused = await cli(['agents', 'pause', agentId, '--json']);
    expect(paused.code, paused.stderr).toBe(0);
    expect(JSON.parse(paused.stdout)).toMatchObject({ id: agentId, status: 'paused' });
    const resumed = await cli(['agents', 'resume', agentId, '--json']);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ id: agentId, status: 'idle' });
    expect(JSON.parse((await cli(['agents', 'exec', agentId, '--json', 'echo back'])).stdout)).toMatchObject({ stdout: 'back\n' });
    const ended = await cli(['agents', 'terminate', agentId, '--json']);
    expect(JSON.parse(ended.stdout)).toEqual({ ok: true, id: agentId });
    expect(JSON.parse((await cli(['agents', 'get', agentId, '--json'])).stdout)).toMatchObject({ status: 'terminated' });
  });
});

describe('berth run', () => {
  it('follows a task as JSON lines to the completed task, and ends the agent it started (test key)', async () => {
    const result = await cli(['run', 'List the files in /workspace', '--user', 'cli-run', '--json'], { env: userEnv({ BERTH_URL: berth.baseUrl, BERTH_API_KEY: berth.testKey! }) });
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(lines.map((line) => line.event ?? 'task').slice(-2)).toEqual(['output', 'task']);
    const { task } = lines.at(-1);
    expect(task).toMatchObject({ status: 'completed', output: expect.any(String) });
    expect(lines.at(-2)).toMatchObject({ event: 'output', data: { taskId: task.id, text: task.output } });
    const agents = JSON.parse((await cli(['agents', 'list', '--json', '--key', berth.testKey!])).stdout);
    expect(agents.find((agent: { id: string }) => agent.id === task.agentId)).toMatchObject({ status: 'terminated' });
  });

  it('prints the answer on stdout and the progress on stderr, without colours off a terminal', async () => {
    const result = await cli(['run', 'Say hello', '--user', 'cli-run'], { env: userEnv({ BERTH_URL: berth.baseUrl, BERTH_API_KEY: berth.testKey! }) });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.trim()).not.toBe('');
    expect(result.stderr).toMatch(/task task_\S+ on agt_/);
    expect(result.stderr).toMatch(/completed in \d+\.\ds/);
    expect(result.stdout + result.stderr).not.toContain(ESC);
  });

  it('shows a spinner with the time spent on a terminal, then the answer', async () => {
    inTerminal('run', ['run', 'Say hello', '--user', 'cli-run'], { BERTH_URL: berth.baseUrl, BERTH_API_KEY: berth.testKey! });
    const text = await untilScreen('run', /EXIT=\d/);
    expect(text).toContain('EXIT=0');
    expect(text).toMatch(/completed in/);
    expect(screen('run', true)).toContain(ESC);
  });
});
