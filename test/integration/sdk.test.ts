import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import WebSocket from 'ws';
import { createApiKey, createOrganization } from '../../common/src/index.js';
import { Berth, BerthApiError, isApiError, verifyWebhookSignature, type AgentHandle, type ExecChunk, type WebSocketConstructor } from '../../sdk/src/index.js';
import { GENERATED_FILE, generateTypes } from '../../sdk/scripts/generate-types.mjs';
import { ROOT, startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { eventually } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir } from '../helpers/runsc.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * The TypeScript SDK (sdk/, ADR 43) against a real `berth up` with gVisor sandboxes: its types
 * are those of the served document, the README's quickstart runs as written, and each wrapper
 * does what its route does.
 */
let berth: BerthProcess;
let live: Berth;
let test: Berth;
let receiver: WebhookReceiver;
let agent: AgentHandle;
let databaseUrl: string;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  databaseUrl = await createTestDatabase();
  berth = await startBerth({ env: { DATABASE_URL: databaseUrl, BERTH_WEBHOOK_ALLOW_PRIVATE: 'true', BERTH_WEBHOOK_ALLOW_HTTP: 'true' } });
  live = new Berth({ url: berth.baseUrl, apiKey: berth.liveKey! });
  test = new Berth({ url: berth.baseUrl, apiKey: berth.testKey! });
  const session = await live.sessions.forUser('sdk-user');
  agent = await live.agents.create(session.id, { timeout: '1h' });
});
afterAll(async () => {
  await receiver?.close();
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
});

describe('the SDK against a real berth up', () => {
  it('has the types of the document the server serves (regenerate with make sdk-types)', async () => {
    const document = await (await fetch(`${berth.baseUrl}/v1/openapi.json`)).json();
    expect(generateTypes(document) === readFileSync(GENERATED_FILE, 'utf8'), `${GENERATED_FILE} is stale: run make sdk-types`).toBe(true);
  });

  it("runs the README's quickstart as written", async () => {
    const quickstart = /<!-- sdk-quickstart -->\n```ts\n([\s\S]*?)\n```/;
    const code = quickstart.exec(readFileSync(join(ROOT, 'README.md'), 'utf8'))?.[1];
    // The package's own README (what npm shows) and the SDK's page carry the same block.
    for (const page of [join('sdk', 'README.md'), join('docs', 'sdk.md')]) expect(quickstart.exec(readFileSync(join(ROOT, page), 'utf8'))?.[1], page).toBe(code);
    expect(code).toMatch(/^import \{ Berth \} from .@berth\/sdk.;$/m);
    // In a directory of its own outside the repository, with the package as `npm pack` makes it:
    // what a user installs, and proof that it needs nothing of the workspace at run time.
    const dir = tempDir('berth-sdk-quickstart-');
    const tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: join(ROOT, 'sdk'), encoding: 'utf8' }).trim().split('\n').at(-1)!;
    mkdirSync(join(dir, 'node_modules', '@berth'), { recursive: true });
    execFileSync('tar', ['-xzf', join(dir, tarball), '-C', join(dir, 'node_modules', '@berth')]);
    renameSync(join(dir, 'node_modules', '@berth', 'package'), join(dir, 'node_modules', '@berth', 'sdk'));
    writeFileSync(join(dir, 'quickstart.mjs'), code!);
    try {
      const child = spawn(process.execPath, [join(dir, 'quickstart.mjs')], {
        env: { ...process.env, BERTH_URL: berth.baseUrl, BERTH_API_KEY: berth.liveKey! },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      const ticks: number[] = [];
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (chunk.toString().includes('tick')) ticks.push(Date.now());
      });
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exitCode = await new Promise((resolve) => child.on('close', resolve));
      expect(exitCode, stderr).toBe(0);
      expect(stdout).toBe('42 0\ntick 1\ntick 2\ntick 3\n');
      // Streamed: the ticks arrived as they were printed, not at the end.
      expect(ticks.length).toBeGreaterThanOrEqual(2);
      expect(ticks.at(-1)! - ticks[0]!).toBeGreaterThanOrEqual(500);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const sessions = await live.sessions.forUser('alice');
    const agents = [];
    for await (const one of live.agents.all({ sessionId: sessions.id })) agents.push(one);
    expect(agents.map((one) => one.status)).toEqual(['terminated']);
  });

  it('execs python, typescript and bash with env, cwd and stdin', async () => {
    expect(await agent.exec.python('import sys\nprint("out", 6 * 7)\nprint("err", file=sys.stderr)\nsys.exit(3)')).toEqual({ stdout: 'out 42\n', stderr: 'err\n', exitCode: 3, durationMs: expect.any(Number) });
    expect(await agent.exec.typescript('const n: number = 5;\nconsole.log(n * 2)')).toMatchObject({ stdout: '10\n', exitCode: 0 });
    await agent.exec.bash('mkdir -p data');
    const result = await agent.exec.bash('echo "$MODE $(pwd) $(cat)"', { env: { MODE: 'dry-run' }, cwd: 'data', stdin: 'rows' });
    expect(result).toMatchObject({ stdout: 'dry-run /workspace/data rows\n', exitCode: 0 });
    expect(await agent.exec({ language: 'python', code: 'print(1)', timeout: 5 })).toMatchObject({ stdout: '1\n' });
  });

  it('streams exec output in pieces as it is printed, then the exit', async () => {
    const chunks: (ExecChunk & { at: number })[] = [];
    for await (const chunk of agent.exec.stream({ language: 'python', code: 'import time, sys\nfor i in range(4):\n    print("tick", i, flush=True)\n    time.sleep(0.7)\nsys.exit(2)' })) {
      chunks.push({ ...chunk, at: Date.now() });
    }
    const output = chunks.filter((chunk) => chunk.type === 'stdout');
    expect(output.map((chunk) => (chunk as { data: string }).data).join('')).toBe('tick 0\ntick 1\ntick 2\ntick 3\n');
    expect(output.length).toBeGreaterThanOrEqual(3);
    expect(output.at(-1)!.at - output[0]!.at).toBeGreaterThanOrEqual(1500);
    expect(chunks.at(-1)).toMatchObject({ type: 'exit', exitCode: 2 });
  });

  it('ends a streamed program when the loop is left early', async () => {
    for await (const chunk of agent.exec.stream({ language: 'bash', code: 'echo started; sleep 60; echo never' })) {
      expect(chunk).toMatchObject({ type: 'stdout', data: 'started\n' });
      break;
    }
    // The program was killed with the connection: nothing of it is still running.
    await eventually(async () => ((await agent.exec.bash('pgrep -f "sleep 60" || true')).stdout === '' ? true : undefined), { timeoutMs: 10_000 });
  });

  it('starts, lists, signals and waits on background processes, and reads their output', async () => {
    const sleeper = await agent.exec.background({ language: 'bash', code: 'echo begun; sleep 60' });
    expect(sleeper.data).toMatchObject({ status: 'running', exitCode: null });
    expect((await agent.processes.list()).map((one) => one.pid)).toContain(sleeper.pid);
    await eventually(async () => ((await sleeper.logs()).stdout === 'begun\n' ? true : undefined), { timeoutMs: 10_000 });
    await sleeper.signal('TERM');
    expect(await sleeper.wait(10)).toMatchObject({ status: 'signaled', exitCode: 128 + 15 });

    const quick = await agent.exec.background({ language: 'python', code: 'print("done")' });
    expect(await quick.wait(30)).toMatchObject({ status: 'exited', exitCode: 0 });
    expect(await agent.processes.handle(quick.pid).logs()).toMatchObject({ stdout: 'done\n', stderr: '', dropped: { stdout: 0, stderr: 0 } });
  });

  it("throws the API's error envelope as a typed error", async () => {
    const missing = await live.agents.get('agt_doesnotexist').catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(BerthApiError);
    expect(missing).toMatchObject({ status: 404, code: 'not_found', requestId: expect.any(String) });
    const outside = await agent.exec.bash('pwd', { cwd: '../etc' }).catch((error: unknown) => error);
    expect(isApiError(outside, 'unprocessable_entity')).toBe(true);
    expect((outside as BerthApiError).details).toMatchObject({ fields: { cwd: [expect.stringContaining('must be inside /workspace')] } });
    const resumeIdle = await agent.resume().catch((error: unknown) => error);
    expect(resumeIdle).toMatchObject({ status: 409, code: 'conflict' });
    const badKey = new Berth({ url: berth.baseUrl, apiKey: 'svc_live_nonsense' });
    await expect(badKey.sessions.list()).rejects.toMatchObject({ status: 401, code: 'auth/invalid_key' });
  });

  it('uploads a stream and downloads it with the same SHA-256; lists, stats, makes, moves, removes and archives files', async () => {
    const bytes = randomBytes(8 * 1024 * 1024);
    const sha = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');
    // From a Node stream, in pieces, as a file from disk would be.
    const written = await agent.files.write('data/blob.bin', Readable.from((function* () {
      for (let at = 0; at < bytes.length; at += 1 << 20) yield bytes.subarray(at, at + (1 << 20));
    })()), { parents: true, mode: 0o600 });
    expect(written).toMatchObject({ name: 'blob.bin', path: '/workspace/data/blob.bin', type: 'file', size: bytes.length, mode: 0o600 });
    const hash = createHash('sha256');
    for await (const chunk of await agent.files.read('data/blob.bin')) hash.update(chunk);
    expect(hash.digest('hex')).toBe(sha(bytes));
    expect((await agent.exec.bash('sha256sum /workspace/data/blob.bin')).stdout.split(' ')[0]).toBe(sha(bytes));

    await agent.files.write('data/notes.txt', 'first\n');
    expect(await agent.files.readText('/workspace/data/notes.txt')).toBe('first\n');
    expect(sha(await agent.files.readBytes('data/blob.bin'))).toBe(sha(bytes));
    expect(await agent.files.mkdir('data/out/plots', { parents: true })).toMatchObject({ type: 'directory', path: '/workspace/data/out/plots' });
    expect(await agent.files.move('data/notes.txt', 'data/out/notes.txt')).toMatchObject({ path: '/workspace/data/out/notes.txt', size: 6 });
    const listing = await agent.files.list('data');
    expect(listing.path).toBe('/workspace/data');
    expect(listing.data.map((entry) => [entry.name, entry.type])).toEqual([['blob.bin', 'file'], ['out', 'directory']]);
    expect(await agent.files.stat('data/out/notes.txt')).toMatchObject({ type: 'file', size: 6 });

    const dir = tempDir('berth-sdk-archive-');
    writeFileSync(join(dir, 'out.tar'), await agent.files.archive('data/out').then((body) => new Response(body).arrayBuffer()).then((buffer) => new Uint8Array(buffer)));
    expect(execFileSync('tar', ['-tf', join(dir, 'out.tar')], { encoding: 'utf8' }).split('\n').filter(Boolean).sort()).toEqual(['./', './notes.txt', './plots/']);

    await expect(agent.files.remove('data/out')).rejects.toMatchObject({ status: 409, code: 'conflict' });
    await agent.files.remove('data/out', { recursive: true });
    await expect(agent.files.stat('data/out')).rejects.toMatchObject({ status: 404, code: 'not_found' });
    await expect(agent.files.read('../etc/passwd')).rejects.toMatchObject({ status: 422, code: 'unprocessable_entity' });
    await agent.files.remove('data', { recursive: true });
  });

  it('watches a directory: its changes as they happen, until the loop is left', async () => {
    await agent.files.mkdir('watched', { parents: true });
    const changes: string[] = [];
    const watching = (async () => {
      for await (const change of agent.files.watch('watched', { recursive: true })) {
        changes.push(`${change.type} ${change.name}`);
        if (change.type === 'remove') return;
      }
    })();
    // The watch is open once the stream is: wait for it before changing anything.
    const watches = async () => metricValue(parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text()), 'berth_file_watches_open');
    await eventually(async () => ((await watches()) === 1 ? true : undefined), { what: 'the watch open' });
    await agent.files.write('watched/new/a.txt', 'a', { parents: true });
    await agent.exec.bash('rm -r /workspace/watched/new');
    await watching;
    expect(changes[0]).toBe('create new');
    expect(changes).toContain('remove new/a.txt');
    // Leaving the loop closed the watch.
    await eventually(async () => ((await watches()) === 0 ? true : undefined), { what: 'the watch closed' });
  }, 60_000);

  it('exposes a port and reaches python -m http.server at the URL the SDK gives; refused without the key; closed again', async () => {
    await agent.files.write('site/index.html', '<h1>through the SDK</h1>', { parents: true });
    const server = await agent.exec.background({ language: 'bash', code: 'cd /workspace/site && exec python3 -m http.server 8100 --bind 127.0.0.1' });
    const exposed = await agent.ports.expose(8100);
    expect(exposed).toMatchObject({ port: 8100, url: agent.ports.url(8100) });
    expect(await agent.ports.list()).toEqual([exposed]);
    const page = await eventually(async () => {
      const response = await fetch(exposed.url + 'index.html', { headers: { authorization: `Bearer ${berth.liveKey}` } });
      return response.status === 200 ? response.text() : undefined;
    }, { what: 'http.server to answer through the proxy' });
    expect(page).toBe('<h1>through the SDK</h1>');
    expect(await (await agent.ports.fetch(8100, 'index.html')).text()).toBe('<h1>through the SDK</h1>');
    expect((await fetch(agent.ports.url(8100, 'index.html'))).status).toBe(401);
    const token = await agent.ports.token(8100);
    expect(token.url.startsWith(`${exposed.url}?berth_token=`)).toBe(true);
    await agent.ports.close(8100);
    expect((await agent.ports.fetch(8100, 'index.html')).status).toBe(404);
    expect(await agent.ports.list()).toEqual([]);
    await server.signal('TERM');
  });

  it('opens a terminal: python3 interactively over the WebSocket, resized', async () => {
    let screen = '';
    const terminal = await agent.terminal({ argv: ['python3', '-q'], rows: 30, cols: 90, WebSocket: WebSocket as unknown as WebSocketConstructor, onData: (data) => (screen += new TextDecoder().decode(data)) });
    await eventually(async () => (screen.includes('>>> ') ? true : undefined), { timeoutMs: 20_000, what: 'the python prompt' });
    terminal.write('import shutil; print(6 * 7, shutil.get_terminal_size())\n');
    await eventually(async () => (/42 os\.terminal_size\(columns=90, lines=30\)/.test(screen) ? true : undefined), { timeoutMs: 10_000, what: `42 and the size in ${JSON.stringify(screen)}` });
    terminal.resize(40, 120);
    terminal.write('print(shutil.get_terminal_size())\n');
    await eventually(async () => (screen.includes('columns=120, lines=40') ? true : undefined), { timeoutMs: 10_000, what: 'the new size' });
    terminal.write('exit(5)\n');
    expect(await terminal.exit).toEqual({ exitCode: 5 });
  });

  it('pauses and resumes an agent, with its snapshot listed', async () => {
    const session = await live.sessions.create({ userId: 'sdk-pause' });
    const paused = await live.agents.create(session.id, { timeout: '1h' });
    await paused.exec.bash('echo kept > /workspace/note');
    await paused.pause();
    await paused.waitFor(['paused']);
    const snapshots = await live.snapshots.list({ agentId: paused.id });
    expect(snapshots[0]).toMatchObject({ agentId: paused.id, sessionId: session.id, type: 'pause' });
    expect(await live.snapshots.get(snapshots[0]!.id)).toMatchObject({ id: snapshots[0]!.id });
    await paused.resume();
    await paused.waitFor(['idle']);
    expect((await paused.exec.bash('cat /workspace/note')).stdout).toBe('kept\n');
    expect(await paused.extend('2h')).toMatchObject({ id: paused.id, timeout: '2h' });
    expect(await live.sessions.end(session.id)).toEqual({ ok: true, terminated: [paused.id] });
    expect((await paused.waitFor(['terminated'])).status).toBe('terminated');
  });

  it('runs a task and follows its events to the output (test key: the mock model)', async () => {
    const session = await test.sessions.forUser('sdk-run');
    const mock = await test.agents.create(session.id);
    const run = await mock.run('List the files in /workspace');
    expect(run).toMatchObject({ taskId: expect.stringMatching(/^task_/), agentId: mock.id });
    const events = [];
    for await (const event of run) events.push(event);
    expect(events.at(-1)).toMatchObject({ event: 'output', data: { taskId: run.taskId, cost: { amount: expect.any(Number), currency: expect.any(String) } } });
    expect(events.every((event) => event.data.taskId === run.taskId)).toBe(true);
    expect(await run.result()).toMatchObject({ id: run.taskId, status: 'completed', output: expect.any(String) });
    expect(await test.tasks.get(run.taskId)).toMatchObject({ status: 'completed' });
    // Its result without reading its events: they are read by result(), whose wait ends with them.
    const second = await mock.run('List the files in /workspace again');
    expect(await second.result()).toMatchObject({ id: second.taskId, status: 'completed', output: expect.any(String) });
  });

  it('keeps secrets by name, session-scoped too, never showing values', async () => {
    expect(await live.secrets.set({ SDK_TOKEN: 'value-1' })).toEqual({ ok: true, count: 1 });
    expect((await live.secrets.list()).map((secret) => secret.name)).toContain('SDK_TOKEN');
    const session = await live.sessions.forUser('sdk-secrets');
    await live.secrets.set({ ONLY_HERE: 'x' }, { sessionId: session.id });
    expect((await live.secrets.list({ sessionId: session.id })).map((secret) => secret.name)).toEqual(['ONLY_HERE']);
    await live.secrets.delete('ONLY_HERE', { sessionId: session.id });
    await live.secrets.delete('SDK_TOKEN');
    expect((await live.secrets.list()).map((secret) => secret.name)).not.toContain('SDK_TOKEN');
  });

  it("verifies a real delivery's signature with the webhook's secret", async () => {
    const webhook = await live.webhooks.create({ url: receiver.url, events: ['agent.completed'] });
    expect(webhook.secret.length).toBeGreaterThan(16);
    expect((await live.webhooks.list()).map((one) => one.id)).toContain(webhook.id);
    await live.webhooks.test(webhook.id);
    const delivery = await eventually(async () => receiver.received[0], { timeoutMs: 20_000, what: 'the test delivery' });
    expect(verifyWebhookSignature(webhook.secret, delivery.body, delivery.headers['x-svc-signature'] as string)).toBe(true);
    expect(verifyWebhookSignature(webhook.secret, `${delivery.body} `, delivery.headers['x-svc-signature'] as string)).toBe(false);
    expect(JSON.parse(delivery.body)).toMatchObject({ event: 'agent.completed' });
    await live.webhooks.delete(webhook.id);
  });

  it('reads usage, sessions page by page and agents across sessions', async () => {
    const summary = await live.usage.summary({ period: 'month' });
    expect(summary).toHaveProperty('totalCost');
    expect(Array.isArray(await live.usage.daily({ period: 'last_7_days' }))).toBe(true);
    for (const userId of ['page-a', 'page-b', 'page-c']) await live.sessions.forUser(userId);
    const first = await live.sessions.list({ limit: 2 });
    expect(first.data).toHaveLength(2);
    expect(first.hasMore).toBe(true);
    const every = [];
    for await (const session of live.sessions.all({ limit: 2 })) every.push(session.userId);
    expect(every).toEqual(expect.arrayContaining(['page-a', 'page-b', 'page-c', 'sdk-user']));
    expect((await live.agents.list({ status: 'idle' })).data.map((one) => one.id)).toContain(agent.id);
  });

  it("meets the server's rate limit: Retry-After read from the real 429, waited for, or not when longer than allowed", async () => {
    // A second organization, on the default (free) plan: 60 requests a minute per key.
    const pool = new pg.Pool({ connectionString: databaseUrl });
    const { key } = await createApiKey(pool, { organizationId: (await createOrganization(pool, 'sdk-free')).id, mode: 'test' }).finally(() => pool.end());
    const limited = new Berth({ url: berth.baseUrl, apiKey: key, retry: { maxRetryAfterMs: 2_000 } });
    for (let i = 0; i < 60; i++) await limited.sessions.list({ limit: 1 });
    const started = Date.now();
    const refused = (await limited.sessions.list({ limit: 1 }).catch((error: unknown) => error)) as BerthApiError;
    expect(refused).toMatchObject({ status: 429, code: 'rate_limited', details: { retryAfter: expect.any(Number) } });
    expect(refused.retryAfter).toBeGreaterThan(2);
    expect(refused.retryAfter).toBeLessThanOrEqual(60);
    expect(Date.now() - started).toBeLessThan(1_500);
    // Allowed to wait that long, it waits (rather than asking again at once) until the caller gives up.
    const patient = new Berth({ url: berth.baseUrl, apiKey: key });
    const abort = new AbortController();
    setTimeout(() => abort.abort(new Error('gave up waiting')), 1_500);
    const waitedFrom = Date.now();
    await expect(patient.sessions.list({ limit: 1 }, { signal: abort.signal })).rejects.toThrow('gave up waiting');
    expect(Date.now() - waitedFrom).toBeGreaterThanOrEqual(1_400);
  });
});
