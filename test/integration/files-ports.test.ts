import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Files and ports of a sandbox (ADR 40) against a real `berth up` with real gVisor sandboxes: a
 * 50 MB upload and download streamed through with Berth's memory flat, listing, mkdir, move,
 * delete and tar, traversal refused, a directory watched over SSE (ADR 51), and a port reached
 * through the proxy over HTTP and WebSocket.
 */
let berth: BerthProcess;
let live: ApiClient;
let test: ApiClient;
let agentId: string;

beforeAll(async () => {
  berth = await startBerth({ env: { DATABASE_URL: await createTestDatabase() } });
  live = berth.api(berth.liveKey);
  test = berth.api(berth.testKey);
  const session = (await live.post('/v1/sessions', { userId: 'files-user' })).body;
  agentId = (await live.post(`/v1/sessions/${session.id}/agents`, { timeout: '1h' })).body.id;
  await eventually(async () => ((await live.get(`/v1/agents/${agentId}`)).body.status === 'idle' ? true : undefined), { timeoutMs: 60_000 });
}, 120_000);
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
});

function expectError(response: { status: number; body: any }, status: number, code: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error.code).toBe(code);
}

function rssKiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}

/** Samples Berth's resident memory every 50 ms while `work` runs; the highest it reached. */
async function peakRss<T>(work: () => Promise<T>): Promise<{ result: T; peakKiB: number }> {
  const pid = berth.child.pid!;
  let peakKiB = rssKiB(pid);
  const timer = setInterval(() => (peakKiB = Math.max(peakKiB, rssKiB(pid))), 50);
  try {
    return { result: await work(), peakKiB };
  } finally {
    clearInterval(timer);
  }
}

async function exec(code: string, language = 'bash') {
  const response = await live.post(`/v1/agents/${agentId}/exec`, { language, code });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body;
}

describe('files', () => {
  it('streams a 50 MB upload and download through with matching SHA-256, Berth memory flat', async () => {
    const size = 50 * 1024 * 1024;
    const chunk = randomBytes(1024 * 1024);
    const sent = createHash('sha256');
    for (let i = 0; i < 50; i += 1) sent.update(chunk);
    // A first transfer of 8 MB settles the process's buffer pools and heap, so that what follows
    // measures growth with the size of a transfer (none when streamed), not the first use of the path.
    const warmUp = await fetch(`${berth.baseUrl}/v1/agents/${agentId}/files?path=warm.bin`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${berth.liveKey}`, 'content-type': 'application/octet-stream' },
      body: Buffer.concat(Array.from({ length: 8 }, () => chunk)),
    });
    expect(warmUp.status).toBe(201);
    await (await fetch(`${berth.baseUrl}/v1/agents/${agentId}/files?path=warm.bin`, { headers: { authorization: `Bearer ${berth.liveKey}` } })).arrayBuffer();
    const before = rssKiB(berth.child.pid!);
    const upload = await peakRss(async () => {
      const body = Readable.from((function* () {
        for (let i = 0; i < 50; i += 1) yield chunk;
      })());
      const response = await fetch(`${berth.baseUrl}/v1/agents/${agentId}/files?path=big/blob.bin&parents=true`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${berth.liveKey}`, 'content-type': 'application/octet-stream' },
        body: Readable.toWeb(body) as ReadableStream,
        duplex: 'half',
      } as RequestInit);
      return { status: response.status, body: await response.json() };
    });
    expect(upload.result.status, JSON.stringify(upload.result.body)).toBe(201);
    expect(upload.result.body).toMatchObject({ path: '/workspace/big/blob.bin', type: 'file', size, mode: 0o644 });
    // Inside the sandbox the file is the bytes sent.
    expect((await exec('sha256sum /workspace/big/blob.bin | cut -d" " -f1')).stdout.trim()).toBe(sent.digest('hex'));

    const download = await peakRss(async () => {
      const response = await fetch(`${berth.baseUrl}/v1/agents/${agentId}/files?path=/workspace/big/blob.bin`, { headers: { authorization: `Bearer ${berth.liveKey}` } });
      expect(response.status).toBe(200);
      expect(response.headers.get('x-file-size')).toBe(String(size));
      const received = createHash('sha256');
      let length = 0;
      for await (const piece of Readable.fromWeb(response.body as never)) {
        received.update(piece as Buffer);
        length += (piece as Buffer).length;
      }
      return { length, digest: received.digest('hex') };
    });
    const inSandbox = (await exec('sha256sum /workspace/big/blob.bin | cut -d" " -f1')).stdout.trim();
    expect(download.result).toEqual({ length: size, digest: inSandbox });
    // 50 MB went each way; Berth grew by far less (the windows of the channel, not the file).
    expect(upload.peakKiB - before).toBeLessThan(30 * 1024);
    expect(download.peakKiB - before).toBeLessThan(30 * 1024);
  }, 180_000);

  it('lists, makes directories, moves, deletes and downloads a directory as tar', async () => {
    const made = await live.post(`/v1/agents/${agentId}/files/mkdir`, { path: 'proj/src', parents: true });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body).toMatchObject({ path: '/workspace/proj/src', type: 'directory' });
    expectError(await live.post(`/v1/agents/${agentId}/files/mkdir`, { path: 'proj' }), 409, 'conflict');
    const put = await live.raw(`/v1/agents/${agentId}/files?path=proj/src/main.py&mode=755`, { method: 'PUT', body: 'print("hi")\n', headers: { 'content-type': 'application/octet-stream' } });
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    expect(put.body).toMatchObject({ size: 12, mode: 0o755 });
    await exec('ln -s src/main.py /workspace/proj/link.py');
    const listed = await live.get(`/v1/agents/${agentId}/files/list?path=proj`);
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((entry: any) => [entry.name, entry.type])).toEqual([
      ['link.py', 'symlink'],
      ['src', 'directory'],
    ]);
    expect(listed.body.data[0]).toMatchObject({ target: 'src/main.py' });
    expect(Date.parse(listed.body.data[1].modifiedAt)).toBeGreaterThan(Date.now() - 600_000);
    const moved = await live.post(`/v1/agents/${agentId}/files/move`, { from: 'proj/src/main.py', to: 'proj/src/app.py' });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect((await live.get(`/v1/agents/${agentId}/files/stat?path=proj/src/app.py`)).body).toMatchObject({ type: 'file', size: 12 });
    expectError(await live.get(`/v1/agents/${agentId}/files/stat?path=proj/src/main.py`), 404, 'not_found');

    const tar = await fetch(`${berth.baseUrl}/v1/agents/${agentId}/files/archive?path=proj`, { headers: { authorization: `Bearer ${berth.liveKey}` } });
    expect(tar.status).toBe(200);
    expect(tar.headers.get('content-type')).toBe('application/x-tar');
    const members = spawnSync('tar', ['-t', '-v', '-f', '-'], { input: Buffer.from(await tar.arrayBuffer()) }).stdout.toString();
    expect(members).toMatch(/\.\/src\/app\.py/);
    expect(members).toMatch(/\.\/link\.py -> src\/main\.py/);

    expectError(await live.raw(`/v1/agents/${agentId}/files?path=proj`, { method: 'DELETE' }), 409, 'conflict');
    expect((await live.raw(`/v1/agents/${agentId}/files?path=proj&recursive=true`, { method: 'DELETE' })).status).toBe(204);
    expectError(await live.get(`/v1/agents/${agentId}/files/list?path=proj`), 404, 'not_found');
  }, 60_000);

  it('refuses paths that leave /workspace with 422, symlinks resolved in the sandbox', async () => {
    await exec('ln -sfn /etc /workspace/etc-link && ln -sfn /etc/passwd /workspace/passwd-link');
    for (const path of ['../etc/passwd', '/etc/passwd', 'a/../../etc', '%2E%2E/etc/passwd']) {
      expectError(await live.get(`/v1/agents/${agentId}/files?path=${path}`), 422, 'unprocessable_entity');
    }
    expectError(await live.get(`/v1/agents/${agentId}/files?path=passwd-link`), 422, 'unprocessable_entity');
    expectError(await live.get(`/v1/agents/${agentId}/files/list?path=etc-link`), 422, 'unprocessable_entity');
    expectError(await live.raw(`/v1/agents/${agentId}/files?path=etc-link/evil`, { method: 'PUT', body: 'x', headers: { 'content-type': 'application/octet-stream' } }), 422, 'unprocessable_entity');
    expectError(await live.get(`/v1/agents/${agentId}/files/archive?path=etc-link`), 422, 'unprocessable_entity');
    expect((await exec('test -e /etc/evil && echo written || echo absent')).stdout.trim()).toBe('absent');
    // Removing the link removes the link, not what it points at.
    expect((await live.raw(`/v1/agents/${agentId}/files?path=etc-link`, { method: 'DELETE' })).status).toBe(204);
    expect((await exec('test -d /etc && echo kept')).stdout.trim()).toBe('kept');
  }, 60_000);

  it('watches a directory over SSE: changes by name and type as they happen, until the client closes it', async () => {
    await exec('mkdir -p /workspace/w/sub');
    const { abort, changes, read } = await watchChanges(berth.liveKey!, agentId, 'path=w&recursive=true');
    const put = await live.raw(`/v1/agents/${agentId}/files?path=w/sub/a.txt`, { method: 'PUT', body: 'a', headers: { 'content-type': 'application/octet-stream' } });
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    await exec('mv /workspace/w/sub/a.txt /workspace/w/b.txt && chmod 600 /workspace/w/b.txt && rm /workspace/w/b.txt');
    await eventually(async () => (changes.some((change) => change.name === 'b.txt' && change.type === 'remove') ? true : undefined), { timeoutMs: 15_000 });
    expect(changes).toEqual([
      { seq: 1, name: 'sub/a.txt', type: 'create' },
      { seq: 2, name: 'sub/a.txt', type: 'write' },
      { seq: 3, name: 'sub/a.txt', type: 'rename' },
      { seq: 4, name: 'b.txt', type: 'create' },
      { seq: 5, name: 'b.txt', type: 'chmod' },
      { seq: 6, name: 'b.txt', type: 'remove' },
    ]);
    const open = async () => metricValue(parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text()), 'berth_file_watches_open', { provider: 'local' });
    expect(await open()).toBe(1);
    abort.abort();
    await read;
    await eventually(async () => ((await open()) === 0 ? true : undefined), { timeoutMs: 10_000, what: 'the watch closed with its client' });
    // Refused before the stream: a path outside /workspace, a file, nothing there.
    await exec(': > /workspace/w/file');
    expectError(await live.get(`/v1/agents/${agentId}/files/watch?path=../etc`), 422, 'unprocessable_entity');
    expectError(await live.get(`/v1/agents/${agentId}/files/watch?path=w/file`), 422, 'unprocessable_entity');
    expectError(await live.get(`/v1/agents/${agentId}/files/watch?path=nothing`), 404, 'not_found');
  }, 60_000);

  it('gives test keys an in-memory tree with the same answers', async () => {
    const session = (await test.post('/v1/sessions', { userId: 'files-test-user' })).body;
    const agent = (await test.post(`/v1/sessions/${session.id}/agents`, {})).body;
    await eventually(async () => ((await test.get(`/v1/agents/${agent.id}`)).body.status === 'idle' ? true : undefined), { timeoutMs: 30_000 });
    const put = await test.raw(`/v1/agents/${agent.id}/files?path=notes/a.txt&parents=true`, { method: 'PUT', body: 'hello', headers: { 'content-type': 'application/octet-stream' } });
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    expect((await test.raw(`/v1/agents/${agent.id}/files?path=notes/a.txt`, { method: 'GET' })).body).toBe('hello');
    expect((await test.get(`/v1/agents/${agent.id}/files/list?path=notes`)).body.data).toMatchObject([{ name: 'a.txt', size: 5, type: 'file' }]);
    expectError(await test.raw(`/v1/agents/${agent.id}/files?path=notes`, { method: 'DELETE' }), 409, 'conflict');
    expectError(await test.get(`/v1/agents/${agent.id}/files?path=../x`), 422, 'unprocessable_entity');
    // A watch of the in-memory tree hears what the files API changes in it, as inotify would.
    const { abort, changes, read } = await watchChanges(berth.testKey!, agent.id, 'path=notes&recursive=true');
    expect((await test.raw(`/v1/agents/${agent.id}/files?path=notes/deep/b.txt&parents=true`, { method: 'PUT', body: 'b', headers: { 'content-type': 'application/octet-stream' } })).status).toBe(201);
    expect((await test.raw(`/v1/agents/${agent.id}/files?path=notes/a.txt`, { method: 'DELETE' })).status).toBe(204);
    await eventually(async () => (changes.some((change) => change.type === 'remove') ? true : undefined), { timeoutMs: 10_000, what: 'the removal told' });
    expect(changes).toEqual([
      { seq: 1, name: 'deep', type: 'create' },
      { seq: 2, name: 'deep/b.txt', type: 'create' },
      { seq: 3, name: 'deep/b.txt', type: 'write' },
      { seq: 4, name: 'a.txt', type: 'remove' },
    ]);
    abort.abort();
    await read;
  }, 60_000);
});

/** `GET /v1/agents/{id}/files/watch?<query>` opened, and its change events collected as they come until `abort`. */
async function watchChanges(key: string, agentId: string, query: string) {
  const abort = new AbortController();
  const response = await fetch(`${berth.baseUrl}/v1/agents/${agentId}/files/watch?${query}`, { headers: { authorization: `Bearer ${key}` }, signal: abort.signal });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const changes: { seq: number; name: string; type: string }[] = [];
  const read = (async () => {
    const decoder = new TextDecoder();
    let text = '';
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      const events = text.split('\n\n');
      text = events.pop()!;
      for (const event of events) {
        if (event.includes('event: change\n')) changes.push(JSON.parse(/^data: (.*)$/m.exec(event)![1]!));
      }
    }
  })().catch(() => undefined);
  return { abort, changes, read };
}

describe('ports', () => {
  const port = 8000;
  const proxied = (path = '') => `/v1/agents/${agentId}/ports/${port}/proxy/${path}`;

  it('is closed until exposed, then reaches python -m http.server through the proxy with a key or a token', async () => {
    await live.post(`/v1/agents/${agentId}/files/mkdir`, { path: 'site', parents: true });
    await live.raw(`/v1/agents/${agentId}/files?path=site/index.html`, { method: 'PUT', body: '<h1>from the sandbox</h1>', headers: { 'content-type': 'application/octet-stream' } });
    const server = await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: `cd /workspace/site && python3 -m http.server ${port} --bind 127.0.0.1`, background: true });
    expect(server.status, JSON.stringify(server.body)).toBe(202);

    // Off by default: the proxy answers 404 before the port is exposed.
    expectError(await live.get(proxied()), 404, 'not_found');
    const exposed = await live.post(`/v1/agents/${agentId}/ports`, { port });
    expect(exposed.status, JSON.stringify(exposed.body)).toBe(201);
    expect(exposed.body.url).toBe(`${berth.baseUrl}${proxied()}`);
    expect((await live.post(`/v1/agents/${agentId}/ports`, { port })).status).toBe(200);
    expect((await live.get(`/v1/agents/${agentId}/ports`)).body.data).toMatchObject([{ port }]);

    const page = await eventually(async () => {
      const response = await live.raw(proxied('index.html'), { method: 'GET' });
      return response.status === 200 ? response : undefined;
    }, { timeoutMs: 20_000 });
    expect(page.body).toBe('<h1>from the sandbox</h1>');
    // The program's query string passes through as it is, repeated parameters included.
    expect((await live.raw(proxied('index.html?tag=a&tag=b&q=%20x'), { method: 'GET' })).status).toBe(200);
    // Without credentials, or with another organization's mode, refused.
    expectError(await berth.api(undefined).get(proxied('index.html')), 401, 'unauthorized');
    expectError(await test.get(proxied('index.html')), 404, 'not_found');

    // A browser: the token's URL sets a cookie for the port's path and redirects without the token.
    const token = await live.post(`/v1/agents/${agentId}/ports/${port}/token`, {});
    expect(token.status, JSON.stringify(token.body)).toBe(201);
    const first = await fetch(token.body.url, { redirect: 'manual' });
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe(proxied().slice(0, -1) + '/');
    const cookie = first.headers.get('set-cookie')!.split(';')[0]!;
    const withCookie = await fetch(`${berth.baseUrl}${proxied('index.html')}`, { headers: { cookie } });
    expect(withCookie.status).toBe(200);
    expect(await withCookie.text()).toBe('<h1>from the sandbox</h1>');
    expectError(await berth.api(undefined).raw(proxied('index.html'), { method: 'GET', headers: { cookie: 'berth_port_token=prt_forged.sig' } }), 401, 'unauthorized');

    // Closed again: 404.
    expect((await live.raw(`/v1/agents/${agentId}/ports/${port}`, { method: 'DELETE' })).status).toBe(204);
    expectError(await live.get(proxied('index.html')), 404, 'not_found');
    // Exposed with nothing listening: 502 naming the port.
    await live.post(`/v1/agents/${agentId}/ports`, { port: 8001 });
    const closed = await live.get(`/v1/agents/${agentId}/ports/8001/proxy/`);
    expectError(closed, 502, 'provider_error');
    expect(closed.body.error.details).toMatchObject({ port: 8001, reason: 'port_closed' });
  }, 90_000);

  it('proxies a WebSocket to a server inside the sandbox', async () => {
    const wsPort = 8765;
    // A small WebSocket echo server with the standard library only (RFC 6455 handshake and frames).
    const server = `
import base64, hashlib, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', ${wsPort})); s.listen(4)
while True:
    c, _ = s.accept()
    head = b''
    while b'\\r\\n\\r\\n' not in head:
        head += c.recv(4096)
    key = [l.split(b': ', 1)[1] for l in head.split(b'\\r\\n') if l.lower().startswith(b'sec-websocket-key')][0]
    accept = base64.b64encode(hashlib.sha1(key + b'258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest())
    c.sendall(b'HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' + accept + b'\\r\\n\\r\\n')
    def read(n):
        data = b''
        while len(data) < n:
            more = c.recv(n - len(data))
            if not more:
                raise EOFError
            data += more
        return data
    try:
        while True:
            b1, b2 = read(2)
            n = b2 & 127
            if n == 126:
                n = int.from_bytes(read(2), 'big')
            mask = read(4)
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(read(n)))
            if b1 & 15 == 8:
                break
            reply = b'echo:' + payload
            c.sendall(bytes([0x81, len(reply)]) + reply)
    except EOFError:
        pass
    c.close()
`;
    await live.raw(`/v1/agents/${agentId}/files?path=ws_echo.py`, { method: 'PUT', body: server, headers: { 'content-type': 'application/octet-stream' } });
    const started = await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'python3 /workspace/ws_echo.py', background: true });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    const url = `${berth.baseUrl.replace(/^http/, 'ws')}/v1/agents/${agentId}/ports/${wsPort}/proxy/socket`;

    // Not exposed yet: the upgrade is refused with 404.
    const refused = await new Promise<number>((resolve) => {
      const ws = new WebSocket(url, { headers: { authorization: `Bearer ${berth.liveKey}` } });
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('open', () => resolve(101));
    });
    expect(refused).toBe(404);
    await live.post(`/v1/agents/${agentId}/ports`, { port: wsPort });
    const unauthenticated = await new Promise<number>((resolve) => {
      const ws = new WebSocket(url);
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('open', () => resolve(101));
    });
    expect(unauthenticated).toBe(401);

    const echoed = await eventually(
      () =>
        new Promise<string | undefined>((resolve) => {
          const ws = new WebSocket(url, { headers: { authorization: `Bearer ${berth.liveKey}` } });
          ws.on('open', () => ws.send('hello through the tunnel'));
          ws.on('message', (data) => {
            resolve(data.toString());
            ws.close();
          });
          ws.on('unexpected-response', () => resolve(undefined));
          ws.on('error', () => resolve(undefined));
        }),
      { timeoutMs: 20_000 },
    );
    expect(echoed).toBe('echo:hello through the tunnel');
  }, 60_000);

  it('answers 409 for files and ports of a paused agent', async () => {
    const paused = await live.post(`/v1/agents/${agentId}/pause`, {});
    expect([200, 202], JSON.stringify(paused.body)).toContain(paused.status);
    await eventually(async () => ((await live.get(`/v1/agents/${agentId}`)).body.status === 'paused' ? true : undefined), { timeoutMs: 60_000 });
    expectError(await live.get(`/v1/agents/${agentId}/files/list`), 409, 'conflict');
    await live.post(`/v1/agents/${agentId}/ports`, { port: 8000 });
    expectError(await live.get(proxied()), 409, 'conflict');
  }, 90_000);
});

