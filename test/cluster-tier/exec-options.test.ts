import { createHash, randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerthInCluster, waitForAgent, type BerthInCluster } from './helpers.js';

/**
 * Exec options on the Kubernetes provider (ADR 39, ADR 40): env and stdin over the exec API, a
 * streamed exec whose output arrives as the program prints it, a pod's files over the exec API,
 * a port reached through the proxy, and 501 naming what a pod without the launcher cannot do
 * (background processes; ADR 47). KWOK runs the exec'd commands on this host, in a directory it
 * gives as the workspace (BERTH_WORKSPACE), where no launcher runs: execs take the exec script's
 * way, as in a pod an older Berth started. The launcher's way runs on the real node
 * (test/node-tier/launcher.test.ts).
 */
let berth: BerthInCluster;
let agentId: string;

beforeAll(async () => {
  berth = await startBerthInCluster({ prefix: 'execopts' });
  const session = (await berth.live.post('/v1/sessions', { userId: 'exec-options-user' })).body;
  agentId = (await berth.live.post(`/v1/sessions/${session.id}/agents`, { timeout: '30m' })).body.id;
  await waitForAgent(berth.live, agentId, 'idle');
});
afterAll(async () => {
  await berth.stop();
});

describe('exec options on pods', () => {
  it('passes env and stdin to the program', async () => {
    const response = await berth.live.post(`/v1/agents/${agentId}/exec`, {
      language: 'python',
      code: 'import os, sys\nprint(os.environ["GREETING"], sys.stdin.read().upper())',
      env: { GREETING: 'hello from the pod' },
      stdin: 'given on stdin',
    });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body).toMatchObject({ stdout: 'hello from the pod GIVEN ON STDIN\n', exitCode: 0 });
  });

  it('streams output as the program prints it', async () => {
    const started = Date.now();
    const response = await fetch(`${berth.apiserver.url}/v1/agents/${agentId}/exec/stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${berth.liveKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ language: 'bash', code: 'for i in 1 2 3; do echo "tick $i"; sleep 1; done; echo done >&2' }),
    });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const arrivals: { event: string; data: any; at: number }[] = [];
    let buffered = '';
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += Buffer.from(chunk).toString('utf8');
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event && event !== 'heartbeat') arrivals.push({ event, data: JSON.parse(data ?? 'null'), at: Date.now() - started });
      }
    }
    const ticks = arrivals.filter((arrival) => arrival.event === 'stdout');
    expect(ticks.map((tick) => tick.data.data).join('')).toBe('tick 1\ntick 2\ntick 3\n');
    // The first tick came about two seconds before the end: it was not held until the program ended.
    expect(arrivals.at(-1)!.at - ticks[0]!.at).toBeGreaterThan(1_500);
    expect(arrivals.filter((arrival) => arrival.event === 'stderr').map((arrival) => arrival.data.data).join('')).toBe('done\n');
    expect(arrivals.at(-1)).toMatchObject({ event: 'exit', data: { exitCode: 0 } });
  });

  it("moves a pod's files over the exec API, confined to the workspace", { timeout: 60_000 }, async () => {
    const dir = `files-${agentId}`;
    const url = (path: string) => `${berth.apiserver.url}/v1/agents/${agentId}/files${path}`;
    const auth = { authorization: `Bearer ${berth.liveKey}` };
    const body = randomBytes(5 * 1024 * 1024);
    const put = await fetch(url(`?path=${dir}/data/blob.bin&parents=true&mode=600`), { method: 'PUT', headers: { ...auth, 'content-type': 'application/octet-stream' }, body });
    expect(put.status, await put.clone().text()).toBe(201);
    expect(await put.json()).toMatchObject({ path: `/workspace/${dir}/data/blob.bin`, type: 'file', size: body.length, mode: 0o600 });
    const get = await fetch(url(`?path=${dir}/data/blob.bin`), { headers: auth });
    expect(get.status).toBe(200);
    expect(createHash('sha256').update(Buffer.from(await get.arrayBuffer())).digest('hex')).toBe(createHash('sha256').update(body).digest('hex'));

    expect((await berth.live.post(`/v1/agents/${agentId}/files/mkdir`, { path: `${dir}/out`, parents: false })).status).toBe(201);
    expect((await berth.live.post(`/v1/agents/${agentId}/files/mkdir`, { path: `${dir}/out` })).status).toBe(409);
    const moved = await berth.live.post(`/v1/agents/${agentId}/files/move`, { from: `${dir}/data/blob.bin`, to: `${dir}/out/blob.bin` });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    const listed = await berth.live.get(`/v1/agents/${agentId}/files/list?path=${dir}`);
    expect(listed.body.data.map((entry: any) => [entry.name, entry.type])).toEqual([
      ['data', 'directory'],
      ['out', 'directory'],
    ]);
    const tar = await fetch(url(`/archive?path=${dir}/out`), { headers: auth });
    expect(tar.status).toBe(200);
    expect(spawnSync('tar', ['-t', '-f', '-'], { input: Buffer.from(await tar.arrayBuffer()) }).stdout.toString().split('\n').sort()).toContain('./blob.bin');

    await berth.live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: `ln -s /etc "$BERTH_WORKSPACE/${dir}/etc-link"` });
    for (const path of [`${dir}/etc-link/passwd`, '../etc/passwd']) {
      const refused = await berth.live.get(`/v1/agents/${agentId}/files/stat?path=${path}`);
      expect(refused.status, JSON.stringify(refused.body)).toBe(422);
    }
    expect((await berth.live.get(`/v1/agents/${agentId}/files/stat?path=${dir}/nothing`)).status).toBe(404);
    expect((await fetch(url(`?path=${dir}`), { method: 'DELETE', headers: auth })).status).toBe(409);
    expect((await fetch(url(`?path=${dir}&recursive=true`), { method: 'DELETE', headers: auth })).status).toBe(204);
    expect((await berth.live.get(`/v1/agents/${agentId}/files/list?path=${dir}`)).status).toBe(404);
  });

  it("reaches a port on the pod's loopback through the proxy, relayed over the exec API", async () => {
    // KWOK's exec runs on this host, so the pod's loopback is this host's: a server here plays the program.
    const server = createServer((req, res) => res.end(`served ${req.method} ${req.url} to ${req.headers.host}, authorization ${req.headers.authorization ?? 'none'}`));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      expect((await berth.live.get(`/v1/agents/${agentId}/ports/${port}/proxy/`)).status).toBe(404);
      expect((await berth.live.post(`/v1/agents/${agentId}/ports`, { port })).status).toBe(201);
      const page = await berth.live.raw(`/v1/agents/${agentId}/ports/${port}/proxy/hello?x=1`, { method: 'GET' });
      expect(page.status).toBe(200);
      expect(page.body).toBe(`served GET /hello?x=1 to 127.0.0.1:${port}, authorization none`);
    } finally {
      server.close();
    }
    const closed = await berth.live.get(`/v1/agents/${agentId}/ports/${port}/proxy/`);
    expect(closed.status, JSON.stringify(closed.body)).toBe(502);
    expect(closed.body.error.details).toMatchObject({ reason: 'port_closed' });
  });

  it('answers 501 naming what a pod without the launcher cannot do', async () => {
    const background = await berth.live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'sleep 1', background: true });
    expect(background.status).toBe(501);
    expect(background.body.error.details).toMatchObject({ field: 'background', provider: 'kubernetes' });
  });
});
