import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createApiKey, findApiKey, revokeApiKey } from '../../common/src/index.js';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Exec beside the spec's route (ADR 39), against a real `berth up` with real gVisor sandboxes:
 * options (env, cwd, stdin, timeout), a streamed exec, a terminal over WebSocket, background
 * processes (across a pause and resume too), and the agent routes across sessions.
 */
let berth: BerthProcess;
let live: ApiClient;
let test: ApiClient;
let db: pg.Pool;

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({ env: { DATABASE_URL: databaseUrl } });
  live = berth.api(berth.liveKey);
  test = berth.api(berth.testKey);
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await db.end();
});

function expectError(response: { status: number; body: any }, status: number, code: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error.code).toBe(code);
}

async function idleAgent(client: ApiClient, userId: string, body: Record<string, unknown> = { timeout: '1h' }) {
  const session = (await client.post('/v1/sessions', { userId })).body;
  const agent = (await client.post(`/v1/sessions/${session.id}/agents`, body)).body;
  await eventually(async () => ((await client.get(`/v1/agents/${agent.id}`)).body.status === 'idle' ? true : undefined), { timeoutMs: 60_000 });
  return { session, agent };
}

interface SseEvent {
  event: string;
  id?: string;
  data: any;
  at: number;
}

/** POSTs and reads the event stream to its end (or until `stopAfter` says so, then disconnects). */
async function stream(key: string, path: string, body: unknown, stopAfter?: (event: SseEvent) => boolean): Promise<{ status: number; events: SseEvent[]; body?: any }> {
  const abort = new AbortController();
  const response = await fetch(`${berth.baseUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: abort.signal,
  });
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return { status: response.status, events: [], body: await response.json() };
  const events: SseEvent[] = [];
  const decoder = new TextDecoder();
  let buffered = '';
  const reader = response.body!.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const fields = Object.fromEntries(block.split('\n').filter((line) => /^(event|data|id): /.test(line)).map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]));
        if (!fields.event) continue;
        const event: SseEvent = { event: fields.event, ...(fields.id ? { id: fields.id } : {}), data: JSON.parse(fields.data ?? 'null'), at: Date.now() };
        events.push(event);
        if (stopAfter?.(event)) {
          abort.abort();
          return { status: response.status, events };
        }
      }
    }
  } catch (error) {
    if (!abort.signal.aborted) throw error;
  }
  return { status: response.status, events };
}

describe('exec options', () => {
  let agent: any;
  beforeAll(async () => {
    ({ agent } = await idleAgent(live, 'exec-options'));
  }, 90_000);

  it('takes env, cwd and stdin', async () => {
    expect((await live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'mkdir -p /workspace/sub/dir' })).body.exitCode).toBe(0);
    const result = await live.post(`/v1/agents/${agent.id}/exec`, {
      language: 'python',
      code: 'import os, sys\nprint(os.environ["GREETING"], os.getcwd(), sys.stdin.read().upper(), sep="|")',
      env: { GREETING: 'hello there' },
      cwd: 'sub/dir',
      stdin: 'from stdin\n',
    });
    expect(result.status, JSON.stringify(result.body)).toBe(200);
    expect(result.body.stdout).toBe('hello there|/workspace/sub/dir|FROM STDIN\n\n');
    // Absolute under /workspace is the same; stdin is empty without it.
    const absolute = await live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'pwd; wc -c', cwd: '/workspace/sub' });
    expect(absolute.body.stdout).toBe('/workspace/sub\n0\n');
  });

  it('refuses a cwd outside the workspace, however it is spelt', async () => {
    for (const cwd of ['..', '../etc', '/etc', 'sub/../../root', '/workspace/../etc', '/workspacex']) {
      const response = await live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'pwd', cwd });
      expectError(response, 422, 'unprocessable_entity');
      expect(JSON.stringify(response.body.error.details), cwd).toContain('cwd');
    }
    // Inside it, `..` is fine.
    const inside = await live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'pwd', cwd: 'sub/dir/..' });
    expect(inside.body.stdout).toBe('/workspace/sub\n');
  });

  it('kills a program at its own timeout, and refuses one over 120 s and bad options', async () => {
    const started = Date.now();
    const response = await live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'sleep 30', timeout: 2 });
    expectError(response, 504, 'timeout');
    expect(Date.now() - started).toBeLessThan(20_000);
    expectError(await live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'true', timeout: 121 }), 422, 'unprocessable_entity');
    expectError(await live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'true', env: { '1BAD': 'x' } }), 422, 'unprocessable_entity');
    expectError(await live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'true', stdin: 'x'.repeat(513 * 1024) }), 422, 'unprocessable_entity');
  });
});

describe('streamed exec (SSE)', () => {
  let agent: any;
  beforeAll(async () => {
    ({ agent } = await idleAgent(live, 'exec-stream'));
  }, 90_000);

  it('sends the output of a program printing over 5 s in pieces as it comes, then its exit', async () => {
    const code = 'import sys, time\nfor i in range(6):\n    print(f"tick {i}", flush=True)\n    time.sleep(1)\nprint("done", file=sys.stderr)\nsys.exit(3)';
    const started = Date.now();
    const { status, events } = await stream(berth.liveKey!, `/v1/agents/${agent.id}/exec/stream`, { language: 'python', code });
    expect(status).toBe(200);
    const output = events.filter((event) => event.event === 'stdout');
    expect(output.map((event) => event.data.data).join('')).toBe([0, 1, 2, 3, 4, 5].map((i) => `tick ${i}\n`).join(''));
    // In pieces as printed: the first long before the last, about a second apart.
    expect(output.length).toBeGreaterThanOrEqual(5);
    expect(output.at(-1)!.at - output[0]!.at).toBeGreaterThan(3_500);
    expect(output[0]!.at - started).toBeLessThan(3_000);
    // Sequence numbers count every chunk of both streams, and are the SSE ids.
    const numbered = events.filter((event) => event.event === 'stdout' || event.event === 'stderr');
    expect(numbered.map((event) => event.data.seq)).toEqual(numbered.map((_, index) => index + 1));
    expect(numbered.map((event) => event.id)).toEqual(numbered.map((_, index) => String(index + 1)));
    // `python3 -u` writes print's text and its newline apart, so the stderr may come in two pieces.
    expect(events.filter((event) => event.event === 'stderr').map((event) => event.data.data).join('')).toBe('done\n');
    const exit = events.at(-1)!;
    expect(exit.event).toBe('exit');
    expect(exit.data.exitCode).toBe(3);
  }, 60_000);

  it('runs past 120 s only as long as asked: its timeout ends it with an error event', async () => {
    const { events } = await stream(berth.liveKey!, `/v1/agents/${agent.id}/exec/stream`, { language: 'bash', code: 'echo start; sleep 60', timeout: 2 });
    expect(events.find((event) => event.event === 'stdout')?.data.data).toBe('start\n');
    expect(events.at(-1)).toMatchObject({ event: 'error', data: { code: 'timeout' } });
  }, 30_000);

  it('kills the program when the client disconnects', async () => {
    const code = 'echo $$ > /workspace/streamed.pid; echo ready; exec sleep 300';
    await stream(berth.liveKey!, `/v1/agents/${agent.id}/exec/stream`, { language: 'bash', code }, (event) => event.event === 'stdout');
    await eventually(
      async () => {
        const check = await live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'kill -0 $(cat /workspace/streamed.pid) 2>/dev/null && echo alive || echo gone' });
        return check.body.stdout === 'gone\n' ? true : undefined;
      },
      { timeoutMs: 10_000, what: 'the streamed program to be killed' },
    );
  }, 30_000);

  it('answers errors before the stream as JSON', async () => {
    const response = await stream(berth.liveKey!, `/v1/agents/${agent.id}/exec/stream`, { language: 'bash', code: 'true', cwd: '/etc' });
    expectError(response as any, 422, 'unprocessable_entity');
    const missing = await stream(berth.liveKey!, '/v1/agents/agt_nope/exec/stream', { language: 'bash', code: 'true' });
    expectError(missing as any, 404, 'not_found');
  });
});

/** A WebSocket to the terminal route, with what it received. */
function terminal(path: string, headers: Record<string, string> = {}) {
  const ws = new WebSocket(`${berth.baseUrl.replace(/^http/, 'ws')}${path}`, { headers });
  let screen = '';
  const texts: any[] = [];
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (isBinary) screen += data.toString('utf8');
    else texts.push(JSON.parse(data.toString('utf8')));
  });
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk));
      response.on('end', () => reject(Object.assign(new Error(`refused ${response.statusCode}`), { status: response.statusCode, body: JSON.parse(body) })));
    });
    ws.once('error', reject);
  });
  return { ws, opened, closed, screen: () => screen, texts, until: (text: string) => eventually(async () => (screen.includes(text) ? true : undefined), { timeoutMs: 15_000, what: `"${text}" on the terminal; it shows ${JSON.stringify(screen)}` }) };
}

describe('terminal over WebSocket', () => {
  let agent: any;
  beforeAll(async () => {
    ({ agent } = await idleAgent(live, 'exec-pty'));
  }, 90_000);

  it('runs python3 interactively: input, output, resize, exit', async () => {
    const term = terminal(`/v1/agents/${agent.id}/pty?argv=python3&argv=-q&rows=24&cols=80`, { authorization: `Bearer ${berth.liveKey}` });
    await term.opened;
    await term.until('>>> ');
    term.ws.send(Buffer.from('1+1\n'));
    await term.until('\r\n2\r\n');
    term.ws.send(JSON.stringify({ type: 'resize', rows: 40, cols: 132 }));
    term.ws.send(JSON.stringify({ type: 'input', data: 'import os; print(os.get_terminal_size(), os.isatty(0))\n' }));
    await term.until('columns=132, lines=40) True');
    term.ws.send(Buffer.from('exit()\n'));
    expect(await term.closed).toBe(1000);
    expect(term.texts.at(-1)).toEqual({ type: 'exit', exitCode: 0 });
  }, 60_000);

  it('takes a short-lived token instead of the header (browsers), once', async () => {
    const issued = await live.post(`/v1/agents/${agent.id}/pty/token`, {});
    expect(issued.status, JSON.stringify(issued.body)).toBe(201);
    const term = terminal(issued.body.path);
    await term.opened;
    term.ws.send(Buffer.from('echo "in $PWD"; exit 7\n'));
    await term.until('in /workspace');
    expect(await term.closed).toBe(1000);
    expect(term.texts.at(-1)).toEqual({ type: 'exit', exitCode: 7 });
    // Used once: refused again; and for another agent, or without any credentials, refused.
    await expect(terminal(issued.body.path).opened).rejects.toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
    await expect(terminal(`/v1/agents/${agent.id}/pty`).opened).rejects.toMatchObject({ status: 401 });
    await expect(terminal(`/v1/agents/${agent.id}/pty`, { authorization: 'Bearer svc_live_nope' }).opened).rejects.toMatchObject({ status: 401 });
    const other = await live.post(`/v1/agents/${agent.id}/pty/token`, {});
    await expect(terminal(`/v1/agents/agt_someoneelse/pty?token=${other.body.token}`).opened).rejects.toMatchObject({ status: 401 });
  }, 60_000);

  it("refuses a token whose key was revoked after it was issued", async () => {
    const { organizationId } = (await findApiKey(db, berth.liveKey!))!;
    const { key, record } = await createApiKey(db, { organizationId, mode: 'live', label: 'console' });
    const issued = await berth.api(key).post(`/v1/agents/${agent.id}/pty/token`, {});
    expect(issued.status).toBe(201);
    await revokeApiKey(db, record.id, new Date());
    await expect(terminal(issued.body.path).opened).rejects.toMatchObject({ status: 401, body: { error: { code: 'auth/key_revoked' } } });
  });

  it('answers a GET that is not an upgrade with 400, and bad sizes with 422', async () => {
    expectError(await live.get(`/v1/agents/${agent.id}/pty`), 400, 'bad_request');
    await expect(terminal(`/v1/agents/${agent.id}/pty?rows=0`, { authorization: `Bearer ${berth.liveKey}` }).opened).rejects.toMatchObject({ status: 422 });
    await expect(terminal(`/v1/agents/${agent.id}/pty?cwd=/etc`, { authorization: `Bearer ${berth.liveKey}` }).opened).rejects.toMatchObject({ status: 422 });
  });
});

describe('background processes', () => {
  let agent: any;
  beforeAll(async () => {
    ({ agent } = await idleAgent(live, 'exec-background'));
  }, 90_000);

  it('start at once, and can be listed, read, signalled and waited on', async () => {
    const started = await live.post(`/v1/agents/${agent.id}/exec`, {
      language: 'bash',
      code: 'echo "got $(cat)"; echo to-stderr >&2; exec sleep 300',
      stdin: 'input line',
      background: true,
    });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    const { pid } = started.body;
    expect(started.body).toMatchObject({ status: 'running', exitCode: null, endedAt: null });
    const list = await live.get(`/v1/agents/${agent.id}/processes`);
    expect(list.body.data.map((process: any) => process.pid)).toContain(pid);
    const running = await live.post(`/v1/agents/${agent.id}/processes/${pid}/wait`, { timeout: 1 });
    expect(running.body.status).toBe('running');
    await eventually(async () => ((await live.get(`/v1/agents/${agent.id}/processes/${pid}/logs`)).body.stdout === 'got input line\n' ? true : undefined));
    expect((await live.post(`/v1/agents/${agent.id}/processes/${pid}/signal`, { signal: 'TERM' })).status).toBe(200);
    const ended = await live.post(`/v1/agents/${agent.id}/processes/${pid}/wait`, { timeout: 10 });
    expect(ended.body, JSON.stringify(ended.body)).toMatchObject({ pid, status: 'signaled', exitCode: 143 });
    expect(ended.body.endedAt).not.toBeNull();
    const logs = await live.get(`/v1/agents/${agent.id}/processes/${pid}/logs`);
    expect(logs.body).toMatchObject({ stdout: 'got input line\n', stderr: 'to-stderr\n', dropped: { stdout: 0, stderr: 0 } });
    expectError(await live.post(`/v1/agents/${agent.id}/processes/999999/wait`, {}), 404, 'not_found');
    expectError(await live.post(`/v1/agents/${agent.id}/processes/${pid}/signal`, { signal: 'SEGV' }), 422, 'unprocessable_entity');
  }, 60_000);

  it('keeps running across a pause and resume (the launcher is in the checkpoint)', async () => {
    const started = await live.post(`/v1/agents/${agent.id}/exec`, {
      language: 'python',
      code: 'import time\ni = 0\nwhile True:\n    print(i, flush=True)\n    i += 1\n    time.sleep(0.2)',
      background: true,
    });
    const { pid } = started.body;
    await eventually(async () => ((await live.get(`/v1/agents/${agent.id}/processes/${pid}/logs`)).body.stdout.split('\n').length > 3 ? true : undefined));
    expect((await live.post(`/v1/agents/${agent.id}/pause`)).body.status).toBe('paused');
    expectError(await live.get(`/v1/agents/${agent.id}/processes`), 409, 'conflict');
    const resumed = await live.post(`/v1/agents/${agent.id}/resume`);
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    await eventually(async () => ((await live.get(`/v1/agents/${agent.id}/processes`)).status === 200 ? true : undefined), { timeoutMs: 60_000 });
    const before = (await live.get(`/v1/agents/${agent.id}/processes/${pid}/logs`)).body;
    expect(before.status).toBe('running');
    const counted = Number(before.stdout.trim().split('\n').at(-1));
    // It counts on from where it was, in the same process.
    await eventually(async () => {
      const now = (await live.get(`/v1/agents/${agent.id}/processes/${pid}/logs`)).body;
      return Number(now.stdout.trim().split('\n').at(-1)) > counted + 2 ? true : undefined;
    });
    expect((await live.post(`/v1/agents/${agent.id}/processes/${pid}/signal`, { signal: 'KILL' })).body.pid).toBe(pid);
    const ended = await live.post(`/v1/agents/${agent.id}/processes/${pid}/wait`, { timeout: 10 });
    expect(ended.body).toMatchObject({ status: 'signaled', exitCode: 137 });
  }, 120_000);
});

describe('test keys (mock provider)', () => {
  it('echo the options, stream a short fake output, and fake background processes', async () => {
    const { agent } = await idleAgent(test, 'exec-mock');
    const result = await test.post(`/v1/agents/${agent.id}/exec`, { language: 'python', code: 'print(1)', env: { A: 'b' }, cwd: 'x', stdin: 'hi' });
    expect(result.body.stdout).toBe(
      '[test mode] python code (8 bytes) accepted; test keys do not run code\n[test mode] cwd: /workspace/x\n[test mode] env: A=b\n[test mode] stdin (2 bytes): hi\n',
    );
    const { events } = await stream(berth.testKey!, `/v1/agents/${agent.id}/exec/stream`, { language: 'bash', code: 'echo' });
    expect(events.filter((event) => event.event === 'stdout').length).toBeGreaterThan(1);
    expect(events.at(-1)).toMatchObject({ event: 'exit', data: { exitCode: 0 } });
    const started = await test.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'sleep 9', background: true });
    expect(started.status).toBe(202);
    expect((await test.get(`/v1/agents/${agent.id}/processes`)).body.data).toHaveLength(1);
    expect((await test.post(`/v1/agents/${agent.id}/processes/${started.body.pid}/wait`, {})).body).toMatchObject({ status: 'exited', exitCode: 0 });
    // A terminal that echoes, through a token as a browser would; ^D ends it.
    const term = terminal((await test.post(`/v1/agents/${agent.id}/pty/token`, {})).body.path);
    await term.opened;
    await term.until('[test mode] terminal 80x24 for bash');
    term.ws.send(Buffer.from('hello\n'));
    await term.until('hello\r\n');
    term.ws.send(JSON.stringify({ type: 'resize', rows: 30, cols: 100 }));
    await term.until('resized to 100x30');
    term.ws.send(Buffer.from([4]));
    expect(await term.closed).toBe(1000);
    expect(term.texts.at(-1)).toEqual({ type: 'exit', exitCode: 0 });
  }, 60_000);
});

describe('agents across sessions', () => {
  it('lists them with filters and pages, extends a timeout, and ends a session', async () => {
    const a = await test.post('/v1/sessions', { userId: 'lister-a' });
    const b = await test.post('/v1/sessions', { userId: 'lister-b' });
    const created: string[] = [];
    for (const session of [a.body, a.body, b.body, b.body, b.body]) {
      created.push((await test.post(`/v1/sessions/${session.id}/agents`, { timeout: '10m' })).body.id);
    }
    for (const id of created) await eventually(async () => ((await test.get(`/v1/agents/${id}`)).body.status === 'idle' ? true : undefined));
    expect((await test.post(`/v1/agents/${created[0]}/terminate`)).status).toBe(200);

    // Every agent of the key, newest first, over pages of 2.
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await test.get(`/v1/agents?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      seen.push(...page.body.data.map((agent: any) => agent.id));
      cursor = page.body.cursor;
    } while (cursor);
    const mine = seen.filter((id) => created.includes(id));
    expect(mine).toEqual([...created].reverse());
    // One session's; by status, paginated too; a cursor of another filter is refused.
    const ofB = await test.get(`/v1/agents?sessionId=${b.body.id}`);
    expect(ofB.body.data.map((agent: any) => agent.id)).toEqual(created.slice(2).reverse());
    const idleOfA = await test.get(`/v1/agents?sessionId=${a.body.id}&status=idle,running`);
    expect(idleOfA.body.data.map((agent: any) => agent.id)).toEqual([created[1]]);
    const firstIdle = await test.get(`/v1/agents?status=idle&limit=1&sessionId=${b.body.id}`);
    expect(firstIdle.body).toMatchObject({ hasMore: true, data: [{ id: created[4] }] });
    const secondIdle = await test.get(`/v1/agents?status=idle&limit=1&sessionId=${b.body.id}&cursor=${encodeURIComponent(firstIdle.body.cursor)}`);
    expect(secondIdle.body.data.map((agent: any) => agent.id)).toEqual([created[3]]);
    expectError(await test.get(`/v1/agents?status=idle&limit=1&cursor=${encodeURIComponent(firstIdle.body.cursor)}`), 422, 'unprocessable_entity');
    expectError(await test.get('/v1/agents?status=sleeping'), 422, 'unprocessable_entity');
    expectError(await test.get('/v1/agents?sessionId=ses_nope'), 404, 'not_found');
    // Live agents are not a test key's.
    expect((await live.get('/v1/agents')).body.data.some((agent: any) => created.includes(agent.id))).toBe(false);

    // PATCH: a longer timeout moves expiresAt; a shorter one is refused, as is a terminated agent's.
    const before = (await test.get(`/v1/agents/${created[1]}`)).body;
    const patched = await test.patch(`/v1/agents/${created[1]}`, { timeout: '2h' });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.timeout).toBe('2h');
    await eventually(async () => {
      const now = (await test.get(`/v1/agents/${created[1]}`)).body;
      return Date.parse(now.expiresAt) - Date.parse(before.expiresAt) === 110 * 60_000 ? true : undefined;
    });
    expectError(await test.patch(`/v1/agents/${created[1]}`, { timeout: '5m' }), 422, 'unprocessable_entity');
    expectError(await test.patch(`/v1/agents/${created[1]}`, { timeout: 'soon' }), 422, 'unprocessable_entity');
    expectError(await test.patch(`/v1/agents/${created[0]}`, { timeout: '3h' }), 409, 'conflict');

    // DELETE a session: its agents end (the terminated one is not ended again); the session stays.
    const ended = await test.raw(`/v1/sessions/${b.body.id}`, { method: 'DELETE' });
    expect(ended.status).toBe(200);
    expect([...ended.body.terminated].sort()).toEqual(created.slice(2).sort());
    for (const id of created.slice(2)) await eventually(async () => ((await test.get(`/v1/agents/${id}`)).body.status === 'terminated' ? true : undefined));
    expect((await test.get(`/v1/agents/${created[1]}`)).body.status).toBe('idle');
    expect((await test.get(`/v1/sessions/${b.body.id}`)).status).toBe(200);
    expect((await test.raw(`/v1/sessions/${b.body.id}`, { method: 'DELETE' })).body).toEqual({ ok: true, terminated: [] });
  }, 120_000);

  it('extends a live agent in its real sandbox', async () => {
    const { agent } = await idleAgent(live, 'extend-live', { timeout: '5m' });
    const patched = await live.patch(`/v1/agents/${agent.id}`, { timeout: '30m' });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await eventually(async () => {
      const now = (await live.get(`/v1/agents/${agent.id}`)).body;
      return Date.parse(now.expiresAt) - Date.parse(now.startedAt) === 30 * 60_000 ? true : undefined;
    });
  }, 90_000);
});
