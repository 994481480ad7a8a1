import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardedGet } from './guarded-get.js';

let server: Server;
let base: string;
const limits = { maxBytes: 1024, timeoutMs: 5_000 };

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/page') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<p>hello</p>');
    if (req.url === '/moved') return void res.writeHead(302, { location: '/page' }).end();
    if (req.url === '/large') return void res.writeHead(200).end('x'.repeat(4096));
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

describe('guardedGet', () => {
  it('fetches a page and follows a redirect when the policy allows the address', async () => {
    const open = { allowHttp: true, allowPrivate: true };
    expect(await guardedGet(`${base}/page`, open, limits)).toEqual({ ok: true, body: Buffer.from('<p>hello</p>'), contentType: 'text/html' });
    expect((await guardedGet(`${base}/moved`, open, limits)).body?.toString()).toBe('<p>hello</p>');
    expect(await guardedGet(`${base}/missing`, open, limits)).toEqual({ ok: false, error: 'answered 404' });
    expect(await guardedGet(`${base}/large`, open, limits)).toEqual({ ok: false, error: 'the document is larger than 1024 bytes' });
  });

  it('refuses loopback, private and http targets as webhooks do', async () => {
    const strict = { allowHttp: false, allowPrivate: false };
    expect((await guardedGet(`${base}/page`, strict, limits)).error).toContain('must be an https URL');
    const httpOnly = { allowHttp: true, allowPrivate: false };
    expect((await guardedGet(`${base}/page`, httpOnly, limits)).error).toContain('private, loopback or link-local');
    expect((await guardedGet('http://localhost/page', httpOnly, limits)).error).toContain('private, loopback or link-local');
    expect((await guardedGet('http://10.1.2.3/page', httpOnly, limits)).error).toContain('private, loopback or link-local');
  });
});
