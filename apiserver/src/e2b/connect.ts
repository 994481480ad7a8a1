import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from '@berth/common';

/**
 * The Connect protocol (connectrpc.com/docs/protocol) with its JSON codec, as far as envd's
 * services need it: unary calls (`application/json`, one JSON body each way) and streams
 * (`application/connect+json`: each message an envelope of a flags byte, a big-endian u32
 * length and the JSON; the last one, flag 0x02, carries the end of the stream and any error).
 */

export type ConnectCode =
  | 'canceled'
  | 'unknown'
  | 'invalid_argument'
  | 'deadline_exceeded'
  | 'not_found'
  | 'already_exists'
  | 'permission_denied'
  | 'resource_exhausted'
  | 'failed_precondition'
  | 'unimplemented'
  | 'internal'
  | 'unavailable'
  | 'unauthenticated';

/** The HTTP status of a unary error, by the protocol's table. */
const UNARY_STATUS: Record<ConnectCode, number> = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  unauthenticated: 401,
};

export class ConnectError extends Error {
  constructor(
    readonly code: ConnectCode,
    message: string,
  ) {
    super(message);
    this.name = 'ConnectError';
  }
}

/** Berth's API errors in Connect's terms (the message kept). */
export function toConnectError(error: unknown): ConnectError {
  if (error instanceof ConnectError) return error;
  if (error instanceof ApiError) {
    const code: ConnectCode =
      error.status === 400 || error.status === 422
        ? 'invalid_argument'
        : error.status === 401
          ? 'unauthenticated'
          : error.status === 403
            ? 'permission_denied'
            : error.status === 404
              ? 'not_found'
              : error.status === 409
                ? 'failed_precondition'
                : error.status === 402 || error.status === 429
                  ? 'resource_exhausted'
                  : error.status === 501
                    ? 'unimplemented'
                    : error.status === 502 || error.status === 503
                      ? 'unavailable'
                      : error.status === 504
                        ? 'deadline_exceeded'
                        : 'internal';
    return new ConnectError(code, error.message);
  }
  return new ConnectError('internal', 'internal error');
}

/** Largest request body a call may send (a SendInput of pasted text, say). */
export const MAX_REQUEST_BYTES = 2 * 1024 * 1024;

export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_REQUEST_BYTES) throw new ConnectError('resource_exhausted', `the request is larger than ${MAX_REQUEST_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export function isStreamingRequest(req: IncomingMessage): boolean {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() === 'application/connect+json';
}

/** The messages of an enveloped request body (a server-streaming call has one, a client stream any number). */
export function parseEnvelopes(body: Buffer): unknown[] {
  const messages: unknown[] = [];
  let offset = 0;
  while (offset < body.length) {
    if (body.length - offset < 5) throw new ConnectError('invalid_argument', 'a truncated envelope');
    const flags = body[offset]!;
    const length = body.readUInt32BE(offset + 1);
    const end = offset + 5 + length;
    if (end > body.length) throw new ConnectError('invalid_argument', 'a truncated envelope');
    if (flags & 0x01) throw new ConnectError('unimplemented', 'compressed messages are not accepted (send Connect-Content-Encoding: identity)');
    messages.push(parseJson(body.subarray(offset + 5, end)));
    offset = end;
  }
  return messages;
}

export function parseJson(bytes: Buffer): unknown {
  if (bytes.length === 0) return {};
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new ConnectError('invalid_argument', 'the message is not JSON');
  }
}

function envelope(flags: number, message: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(message), 'utf8');
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

export function sendUnary(res: ServerResponse, message: unknown): void {
  const body = JSON.stringify(message);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export function sendUnaryError(res: ServerResponse, error: ConnectError): void {
  const body = JSON.stringify({ code: error.code, message: error.message });
  res.writeHead(UNARY_STATUS[error.code], { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** A stream's answer when it fails before its first message: the end-of-stream envelope alone, with the error. */
export function sendStreamError(res: ServerResponse, error: ConnectError): void {
  res.writeHead(200, { 'content-type': 'application/connect+json' });
  res.end(envelope(0x02, { error: { code: error.code, message: error.message } }));
}

/** A server stream: messages as they come, then its end (with an error or not). Writes after the end are dropped. */
export class ServerStream {
  private ended = false;
  /** Settles once the stream ended, or its client went away. */
  readonly closed: Promise<void>;

  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, { 'content-type': 'application/connect+json' });
    res.flushHeaders();
    // The client went away: whoever follows a process for this stream stops (the process runs on).
    this.closed = new Promise((resolve) =>
      res.once('close', () => {
        this.ended = true;
        resolve();
      }),
    );
  }

  get open(): boolean {
    return !this.ended && !this.res.destroyed;
  }

  send(message: unknown): void {
    if (this.open) this.res.write(envelope(0x00, message));
  }

  end(error?: ConnectError): void {
    if (!this.open) return;
    this.ended = true;
    this.res.end(envelope(0x02, error ? { error: { code: error.code, message: error.message } } : {}));
  }
}
