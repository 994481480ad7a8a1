import { createServer, STATUS_CODES, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { ERROR_STATUS, newId, type ErrorCode } from '@berth/common';
import type { ErrorEnvelope } from './errors.js';

/**
 * An HTTP server whose every answer is the error envelope, even those Node writes itself before
 * a request reaches the app: headers over the 16 KiB limit (431), a request that is not HTTP
 * (400), a request that took too long to arrive (408).
 */
export function createApiServer(listener: RequestListener, upgrade?: UpgradeListener): Server {
  const server = createServer(listener);
  // Every upgrade request meets `upgrade` (the terminal WebSocket), which answers the others 404.
  if (upgrade) {
    // An upgraded socket is no longer the HTTP server's to close, but `close` still waits for it:
    // closing all connections (the end of a drain's grace) ends the terminals too.
    const upgraded = new Set<Duplex>();
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      upgraded.add(socket);
      socket.once('close', () => upgraded.delete(socket));
      upgrade(req, socket, head);
    });
    const closeAllConnections = server.closeAllConnections.bind(server);
    server.closeAllConnections = () => {
      closeAllConnections();
      for (const socket of upgraded) socket.destroy();
    };
  }
  server.on('clientError', (error: Error & { code?: string }, socket: Duplex) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [code, message]: [ErrorCode, string] =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? ['headers_too_large', 'the request headers are larger than the 16 KiB limit']
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? ['request_timeout', 'the request did not arrive in time']
          : ['bad_request', 'the request is not valid HTTP'];
    socket.end(rawErrorResponse(code, message));
  });
  return server;
}

export type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/** The error envelope as a whole HTTP response, for a socket no framework answers on. */
export function rawErrorResponse(code: ErrorCode, message: string, details: Record<string, unknown> = {}): string {
  const status = ERROR_STATUS[code];
  const requestId = newId('req');
  const envelope: ErrorEnvelope = { error: { code, message, details, requestId } };
  const body = JSON.stringify(envelope);
  return [
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-Id: ${requestId}`,
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}
