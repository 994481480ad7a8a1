import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * The exchange with a program on a sandbox's port once a connection to it is open (ADR 40): both
 * port proxies, Berth's own (`/v1/agents/{id}/ports/{port}/proxy/…`) and the E2B-compatible
 * surface's, use these; each decides itself who may connect and which headers go on.
 */

/** Headers of one hop only (RFC 9110 7.6.1), never passed on. */
export const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'upgrade', 'transfer-encoding']);

export interface HttpRelay {
  /** The path (and query) the program is asked for. */
  path: string;
  headers: OutgoingHttpHeaders;
  /** Called once: the answer's status code, `client_closed` or `error`. */
  onResult(result: string): void;
  /** The answer when the program did not answer over HTTP and nothing was sent yet. */
  errorResponse(error: Error): { status: number; contentType: string; body: string };
}

/** Sends the request over `connection` (one request per connection) and streams the answer back; resolves when the exchange is over. */
export function relayHttp(req: IncomingMessage, res: ServerResponse, connection: Duplex, relay: HttpRelay): Promise<void> {
  let reported = false;
  const report = (result: string) => {
    if (reported) return;
    reported = true;
    relay.onResult(result);
  };
  return new Promise<void>((resolve) => {
    const upstream = httpRequest({ createConnection: () => connection as never, method: req.method, path: relay.path, headers: { ...relay.headers, connection: 'close' } });
    upstream.on('response', (answer) => {
      const headers: OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, headers);
      answer.pipe(res);
      answer.on('end', () => report(String(answer.statusCode ?? 0)));
      res.on('close', () => {
        report('client_closed');
        connection.destroy();
        resolve();
      });
    });
    upstream.on('error', (error) => {
      report('error');
      connection.destroy();
      if (!res.headersSent) {
        const { status, contentType, body } = relay.errorResponse(error);
        res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) }).end(body);
      } else res.destroy();
      resolve();
    });
    req.pipe(upstream);
  });
}

/**
 * Passes an upgrade request (a WebSocket) over `connection` as it came, then bytes both ways until
 * either side ends; `onClose` is called once then.
 */
export function relayUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, connection: Duplex, path: string, headers: OutgoingHttpHeaders, onClose: () => void): void {
  const lines = [`${req.method} ${path} HTTP/1.1`];
  for (const [name, value] of Object.entries(headers)) for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${String(one)}`);
  connection.write(`${lines.join('\r\n')}\r\n\r\n`);
  if (head.length) connection.write(head);
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    onClose();
    connection.destroy();
    socket.destroy();
  };
  connection.on('error', close);
  connection.on('close', close);
  socket.on('close', close);
  socket.pipe(connection).pipe(socket);
}
