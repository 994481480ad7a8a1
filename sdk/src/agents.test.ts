import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Berth } from './client.js';
import { BerthError } from './errors.js';

/**
 * A real HTTP server on loopback standing in for Berth's agent routes: `POST` create answers the
 * agent with status `created` (booting unless told); each `GET /v1/agents/{id}` answers with the
 * next status of `statuses` (the last one again when they run out). Every request is recorded with
 * its parsed query.
 */
interface FakeAgents {
  url: string;
  requests: { method: string; path: string; query: Record<string, string> }[];
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function fakeAgents(statuses: string[], created = 'booting'): Promise<FakeAgents> {
  const requests: FakeAgents['requests'] = [];
  let gets = 0;
  const server = createServer((req, res) => {
    const url = new URL(req.url!, 'http://fake');
    requests.push({ method: req.method!, path: url.pathname, query: Object.fromEntries(url.searchParams) });
    req.resume();
    req.on('end', () => {
      const status = req.method === 'POST' ? created : statuses[Math.min(gets++, statuses.length - 1)];
      res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'agt_1', status }));
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

const client = (url: string, timeoutMs?: number) => new Berth({ url, apiKey: 'svc_test_x', ...(timeoutMs === undefined ? {} : { timeoutMs }) });

describe('waiting for an agent', () => {
  it('create leaves the waiting to the server: the create itself waits, held under one try’s timeout, and no GET follows a ready agent', async () => {
    const fake = await fakeAgents([], 'idle');
    const agent = await client(fake.url).agents.create('ses_1', {});
    expect(agent.data.status).toBe('idle');
    expect(fake.requests.map(({ method, path }) => `${method} ${path}`)).toEqual(['POST /v1/sessions/ses_1/agents']);
    // The client's tries take 60 s at most: the server holds the create 59 s at most.
    expect(fake.requests[0]!.query).toEqual({ waitFor: 'idle', waitSeconds: '59' });
  });

  it('create goes on waiting with GETs for an agent still booting when the create’s wait ended', async () => {
    const fake = await fakeAgents(['idle']);
    const agent = await client(fake.url).agents.create('ses_1', {}, { waitTimeoutMs: 30_000 });
    expect(agent.data.status).toBe('idle');
    expect(fake.requests.map(({ method, path, query }) => [`${method} ${path}`, query])).toEqual([
      ['POST /v1/sessions/ses_1/agents', { waitFor: 'idle', waitSeconds: '30' }],
      ['GET /v1/agents/agt_1', { waitFor: 'idle', waitSeconds: expect.stringMatching(/^(29|30)$/) }],
    ]);
  });

  it('create without waitUntilReady asks for no wait', async () => {
    const fake = await fakeAgents([]);
    expect((await client(fake.url).agents.create('ses_1', {}, { waitUntilReady: false })).data.status).toBe('booting');
    expect(fake.requests).toEqual([{ method: 'POST', path: '/v1/sessions/ses_1/agents', query: {} }]);
  });

  it('asks again when the server answers at the end of its wait, and gives up at the deadline', async () => {
    const fake = await fakeAgents(['booting']);
    const agent = await client(fake.url).agents.create('ses_1', {}, { waitUntilReady: false });
    const error = await agent.waitFor(['idle'], { waitTimeoutMs: 300 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(BerthError);
    expect((error as Error).message).toBe('agent agt_1 is still booting after 300 ms');
    const gets = fake.requests.filter((request) => request.method === 'GET');
    expect(gets.length).toBeGreaterThanOrEqual(1);
    // What is left of the deadline, rounded up to whole seconds.
    for (const get of gets) expect(get.query).toEqual({ waitFor: 'idle', waitSeconds: '1' });
  });

  it('sends every status it waits for, bounds the hold by the call’s own timeout, and fails when the agent ends', async () => {
    const fake = await fakeAgents(['paused', 'running', 'failed']);
    const agent = await client(fake.url).agents.create('ses_1', {}, { waitUntilReady: false });
    expect((await agent.waitFor(['idle', 'running'], { timeoutMs: 5_000 })).status).toBe('running');
    expect(fake.requests.slice(1).map((request) => request.query)).toEqual([
      { waitFor: 'idle,running', waitSeconds: '4' },
      { waitFor: 'idle,running', waitSeconds: '4' },
    ]);
    await expect(agent.waitFor(['idle'])).rejects.toThrow('agent agt_1 is failed, not idle');
  });

  it('polls without a server-side wait when one try is too short to hold', async () => {
    const fake = await fakeAgents(['booting', 'idle']);
    const agent = await client(fake.url, 1_500).agents.create('ses_1', {});
    expect(agent.data.status).toBe('idle');
    expect(fake.requests.map((request) => request.query)).toEqual([{}, {}, {}]);
  });
});

/**
 * A run's routes: the agent's stream (held open; `end()` sends the task's `output` event), the run's
 * start, and the task, `running` until the output was sent. Task reads are recorded with their time.
 */
async function fakeRun(): Promise<{ url: string; taskReads: number[]; end(): void }> {
  const taskReads: number[] = [];
  let ended = false;
  let stream: import('node:http').ServerResponse | undefined;
  const server = createServer((req, res) => {
    req.resume();
    if (req.url === '/v1/agents/agt_1/stream') {
      stream = res.writeHead(200, { 'content-type': 'text/event-stream' });
      stream.write(': connected\n\n');
      return;
    }
    if (req.url === '/v1/agents/agt_1/run') {
      res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({ taskId: 'tsk_1', agentId: 'agt_1', status: 'queued' }));
      return;
    }
    taskReads.push(Date.now());
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'tsk_1', status: ended ? 'completed' : 'running', output: ended ? 'done' : null }));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    taskReads,
    end: () => {
      ended = true;
      stream!.write(`id: 7\nevent: output\ndata: ${JSON.stringify({ taskId: 'tsk_1', text: 'done' })}\n\n`);
    },
  };
}

describe("a run's result", () => {
  it('is read again as soon as the run’s last event arrives, not at the next interval', async () => {
    const fake = await fakeRun();
    const agent = client(fake.url).agents.handle('agt_1');
    const run = await agent.run('count');
    const result = run.result();
    // Reads at 0, 100 and 300 ms: the next would come 400 ms after the third.
    while (fake.taskReads.length < 3) await new Promise((resolve) => setTimeout(resolve, 5));
    const endedAt = Date.now();
    fake.end();
    expect(await result).toMatchObject({ id: 'tsk_1', status: 'completed', output: 'done' });
    expect(fake.taskReads).toHaveLength(4);
    expect(fake.taskReads[3]! - endedAt).toBeLessThan(200);
  });
});
