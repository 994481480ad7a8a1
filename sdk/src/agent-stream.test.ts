import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Berth } from './client.js';
import { BerthApiError } from './errors.js';

/** A real HTTP server on loopback playing the agent stream: each connection gets the next script. */
type Connection = { status?: number; events: { id?: string; event: string; data: unknown }[] };

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function streamServer(connections: Connection[]): Promise<{ url: string; seen: { lastEventId: string | undefined }[] }> {
  const seen: { lastEventId: string | undefined }[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    seen.push({ lastEventId: req.headers['last-event-id'] as string | undefined });
    const connection = connections[seen.length - 1] ?? { events: [] };
    if (connection.status) {
      res.writeHead(connection.status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'not_found', message: 'agent agt_1 does not exist', details: {}, requestId: 'req_1' } }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('retry: 2000\n\n');
    for (const event of connection.events) res.write(`${event.id ? `id: ${event.id}\n` : ''}event: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`);
    res.end();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const fast = { baseDelayMs: 5, maxDelayMs: 20, maxRetries: 2 };

describe("the agent's stream", () => {
  it('reconnects after a drop with Last-Event-ID, skipping heartbeats, and stops when the server has nothing more', async () => {
    const server = await streamServer([
      { events: [{ id: '1', event: 'thinking', data: { taskId: 't', text: 'a' } }, { event: 'heartbeat', data: { t: 1 } }, { id: '2', event: 'tool_call', data: { taskId: 't', tool: 'exec' } }] },
      { events: [{ id: '3', event: 'output', data: { taskId: 't', text: 'done' } }] },
    ]);
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', retry: fast });
    const events = [];
    for await (const event of berth.agents.handle('agt_1').stream()) events.push([event.id, event.event, event.data.text ?? event.data.tool]);
    expect(events).toEqual([
      ['1', 'thinking', 'a'],
      ['2', 'tool_call', 'exec'],
      ['3', 'output', 'done'],
    ]);
    // After the two that had events, connections that closed without a word, up to maxRetries + 1.
    expect(server.seen.map((connection) => connection.lastEventId)).toEqual([undefined, '2', '3', '3', '3']);
  });

  it('ends with the error when the server answers (an agent that is gone), without asking again', async () => {
    const server = await streamServer([{ status: 404, events: [] }]);
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', retry: fast });
    const iterate = async () => {
      for await (const _ of berth.agents.handle('agt_1').stream()) throw new Error('no event was expected');
    };
    await expect(iterate()).rejects.toBeInstanceOf(BerthApiError);
    expect(server.seen).toHaveLength(1);
  });

  it('starts after lastEventId when given, and ends with the connection when reconnect is false', async () => {
    const server = await streamServer([{ events: [{ id: '8', event: 'thinking', data: { text: 'x' } }] }]);
    const berth = new Berth({ url: server.url, apiKey: 'svc_test_x', retry: fast });
    const seen = [];
    for await (const event of berth.agents.handle('agt_1').stream({ lastEventId: '7', reconnect: false })) seen.push(event.id);
    expect(seen).toEqual(['8']);
    expect(server.seen.map((connection) => connection.lastEventId)).toEqual(['7']);
  });
});
