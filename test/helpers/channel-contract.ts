import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { ROOT } from './berth.js';

/**
 * The public channel routes of docs/channels.md (config, messages, stream) and the widget's
 * script, answering from memory with replies of an OpenAI-protocol model server: for working on
 * the widget before the channels core is there.
 */
export async function startChannelContract(options: { modelBaseUrl: string; channelId: string; theme: unknown }) {
  const conversations = new Map<string, { id: string; role: string; content: string; createdAt: string }[]>();
  const streams = new Map<string, Set<ServerResponse>>();
  let ids = 0;
  const cors = (res: ServerResponse) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Access-Control-Allow-Headers', 'content-type');
  };
  const json = (res: ServerResponse, status: number, body: unknown) => {
    cors(res);
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const store = (visitorId: string, role: string, content: string) => {
    const message = { id: `msg_${++ids}`, role, content, createdAt: new Date().toISOString() };
    const list = conversations.get(visitorId) ?? [];
    list.push(message);
    conversations.set(visitorId, list);
    for (const res of streams.get(visitorId) ?? []) res.write(`event: message\ndata: ${JSON.stringify({ role, content, messageId: message.id })}\n\n`);
    return message;
  };
  const reply = async (visitorId: string): Promise<string> => {
    const messages = conversations.get(visitorId)!.map(({ role, content }) => ({ role, content }));
    const response = await fetch(`${options.modelBaseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test' },
      body: JSON.stringify({ model: 'fake', stream: true, messages }),
    });
    let text = '';
    for (const line of (await response.text()).split('\n')) {
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      text += JSON.parse(line.slice(6)).choices?.[0]?.delta?.content ?? '';
    }
    return text;
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url!, 'http://x');
    if (url.pathname === '/widget/v1/berth-chat.js') {
      res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' });
      res.end(readFileSync(join(ROOT, 'widget', 'dist', 'berth-chat.js')));
      return;
    }
    const base = `/channels/${options.channelId}`;
    if (req.method === 'OPTIONS') {
      cors(res);
      res.writeHead(204).end();
      return;
    }
    const visitorId = url.searchParams.get('visitorId') ?? '';
    if (req.method === 'GET' && url.pathname === `${base}/config`) return json(res, 200, { channelId: options.channelId, type: 'chat_embed', theme: options.theme });
    if (req.method === 'GET' && url.pathname === `${base}/messages`) {
      const list = conversations.get(visitorId);
      return json(res, 200, { conversationId: list ? `conv_${visitorId}` : null, messages: list ?? [] });
    }
    if (req.method === 'GET' && url.pathname === `${base}/stream`) {
      cors(res);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(`event: connected\ndata: ${JSON.stringify({ channelId: options.channelId, visitorId })}\n\n`);
      const set = streams.get(visitorId) ?? new Set();
      set.add(res);
      streams.set(visitorId, set);
      req.on('close', () => set.delete(res));
      return;
    }
    if (req.method === 'POST' && url.pathname === `${base}/messages`) {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = JSON.parse(Buffer.concat(chunks).toString());
      const message = store(body.visitorId, 'user', body.text);
      const content = await reply(body.visitorId);
      store(body.visitorId, 'assistant', content);
      return json(res, 200, { messageId: message.id, conversationId: `conv_${body.visitorId}`, response: { role: 'assistant', content } });
    }
    json(res, 404, { error: { code: 'not_found', message: 'no such route', details: {}, requestId: 'req_x' } });
  };
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
