/**
 * Local HTTP servers that speak the OpenAI chat-completions and Anthropic messages wire
 * protocols, streamed as the vendors stream them, answering from a script. Integration tests
 * run the whole agent loop against them; the adapters' unit tests use them as the upstream.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { ModelError } from '../../operator/src/runner/models/types.js';

export interface FakeToolCall {
  /** Defaults to `call_fake_<request>_<n>` (OpenAI) or `toolu_fake_<request>_<n>` (Anthropic). */
  id?: string;
  name: string;
  /** The arguments; a string is sent as the argument text exactly, e.g. to send malformed JSON. */
  input: Record<string, unknown> | string;
}

/** A successful, streamed answer: text in several deltas, then each tool call with its arguments in pieces. */
export interface FakeReply {
  text?: string;
  toolCalls?: FakeToolCall[];
  /** Token counts in the final chunk (OpenAI) or message_start/message_delta (Anthropic); default 10 in, 5 out. */
  usage?: { input: number; output: number };
  /** Wait this long before answering at all (no status, no headers until then). */
  delayMs?: number;
  /** Wait this long between the stream's events, as a model that writes slowly. */
  pauseMs?: number;
  /** Instead of `stop`/`tool_calls` (OpenAI) or `end_turn`/`tool_use` (Anthropic), e.g. `length` or `max_tokens`. */
  stopReason?: string;
  /** After the content, send the vendor's in-stream error (OpenAI `{ error }` chunk, Anthropic `event: error`) and end. */
  streamError?: { type: string; message: string };
  /** After the content, end the response without the final events (no finish/usage/[DONE], no message_delta/message_stop). */
  endEarly?: boolean;
}

/** An HTTP error with the vendor's JSON error body and, if given, `Retry-After: <seconds>`. */
export interface FakeFailure {
  status: number;
  error?: string;
  retryAfter?: number;
}

export type FakeTurn = FakeReply | FakeFailure;

/** Turns consumed one per model request, or a function that decides from the request body (and its 0-based turn number). */
export type FakeScript = FakeTurn[] | ((body: any, turn: number) => FakeTurn | Promise<FakeTurn>);

export interface FakeModelOptions {
  /** When set, a request with any other key is answered 401 as the vendor would, without using a turn. */
  apiKey?: string;
  /** Write the stream in pieces of this many bytes, cutting through lines and UTF-8 characters. */
  chunkBytes?: number;
}

export interface FakeModelServer {
  /** OpenAI: `http://127.0.0.1:<port>/v1`; Anthropic: `http://127.0.0.1:<port>`. */
  baseUrl: string;
  /** The parsed JSON bodies received on the model path, in order (including refused ones). */
  requests: unknown[];
  /** The headers of those requests, in the same order. */
  headers: IncomingHttpHeaders[];
  /** The API key each request carried: the bearer token (OpenAI) or `x-api-key` (Anthropic). */
  apiKeys(): (string | undefined)[];
  close(): Promise<void>;
}

export function startFakeOpenAI(script: FakeScript, options: FakeModelOptions = {}): Promise<FakeModelServer> {
  return startFake(openAiProtocol, script, options);
}

export function startFakeAnthropic(script: FakeScript, options: FakeModelOptions = {}): Promise<FakeModelServer> {
  return startFake(anthropicProtocol, script, options);
}

/** The bearer token of an `Authorization` header, as an OpenAI-compatible server reads it. */
/**
 * A server that answers with exactly what `listener` writes, for wire-level cases the fakes do not
 * produce (a garbled stream, a body that is not JSON). Resolves with its base URL and a close that
 * cuts open connections.
 */
export async function startRawServer(listener: RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The ModelError a model call fails with; fails the test when it succeeds or fails otherwise. */
export async function modelFailure(promise: Promise<unknown>): Promise<ModelError> {
  const error = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  // Not vitest's expect: the fuzz tier and the benches load this module outside vitest.
  if (!(error instanceof ModelError)) throw new Error(`expected a ModelError, got ${error === undefined ? 'success' : String(error)}`);
  return error;
}

export function bearerToken(headers: IncomingHttpHeaders): string | undefined {
  return /^Bearer (.+)$/.exec(headers.authorization ?? '')?.[1];
}

/** What differs between the two vendors. */
interface Protocol {
  basePath: string;
  modelPath: string;
  apiKeyOf(headers: IncomingHttpHeaders): string | undefined;
  errorBody(status: number, message: string): unknown;
  /** Why the vendor would refuse this body with a 400, if it would. */
  refusal(body: any): string | undefined;
  /** The answer as SSE events: the content, then what completes it (left out by `endEarly`). */
  events(reply: FakeReply, body: any, requestNumber: number): { content: string[]; finish: string[]; error: (error: { type: string; message: string }) => string };
}

const DEFAULT_USAGE = { input: 10, output: 5 };

async function startFake(protocol: Protocol, script: FakeScript, options: FakeModelOptions): Promise<FakeModelServer> {
  const requests: unknown[] = [];
  const headers: IncomingHttpHeaders[] = [];
  const closing = new AbortController();
  let turnsUsed = 0;

  const nextTurn = async (body: unknown): Promise<FakeTurn> => {
    const turn = turnsUsed++;
    if (typeof script === 'function') return script(body, turn);
    return script[turn] ?? { status: 500, error: `fake-models: request ${turn + 1} has no scripted turn (the script has ${script.length})` };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let clientGone = false;
    res.on('close', () => (clientGone = true));
    const fail = (status: number, message: string, retryAfter?: number): void => {
      if (clientGone) return;
      res.writeHead(status, { 'content-type': 'application/json', ...(retryAfter === undefined ? {} : { 'retry-after': String(retryAfter) }) });
      res.end(JSON.stringify(protocol.errorBody(status, message)));
    };

    const text = await readBody(req);
    if (req.method !== 'POST' || req.url !== `${protocol.basePath}${protocol.modelPath}`) return fail(404, `fake-models: no route for ${req.method} ${req.url}`);
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      return fail(400, 'fake-models: the request body is not JSON');
    }
    requests.push(body);
    headers.push(req.headers);
    if (options.apiKey !== undefined && protocol.apiKeyOf(req.headers) !== options.apiKey) return fail(401, 'fake-models: invalid API key');
    const refusal = protocol.refusal(body);
    if (refusal) return fail(400, `fake-models: ${refusal}`);

    let turn: FakeTurn;
    try {
      turn = await nextTurn(body);
    } catch (error) {
      return fail(500, `fake-models: the script function threw: ${String(error)}`);
    }
    if ('status' in turn) return fail(turn.status, turn.error ?? `fake-models: scripted HTTP ${turn.status}`, turn.retryAfter);

    if (turn.delayMs) await sleep(turn.delayMs, undefined, { signal: closing.signal });
    if (clientGone) return;
    const events = protocol.events(turn, body, requests.length);
    const tail = turn.streamError ? [events.error(turn.streamError)] : turn.endEarly ? [] : events.finish;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    await writeStream(res, [...events.content, ...tail], options.chunkBytes, () => clientGone || closing.signal.aborted, turn.pauseMs);
    res.end();
  };

  const server = createServer((req, res) => {
    res.on('error', () => {}); // A client that hangs up mid-stream is expected (abort tests).
    handle(req, res).catch((error: unknown) => {
      if (closing.signal.aborted) return;
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`fake-models: ${String(error)}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}${protocol.basePath}`,
    requests,
    headers,
    apiKeys: () => headers.map((h) => protocol.apiKeyOf(h)),
    close: async () => {
      closing.abort();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** One write per event (or per `chunkBytes`), yielding (or pausing `pauseMs`) between writes so they leave as separate packets. */
async function writeStream(res: ServerResponse, events: string[], chunkBytes: number | undefined, stopped: () => boolean, pauseMs?: number): Promise<void> {
  const pieces = chunkBytes ? slices(Buffer.from(events.join('')), chunkBytes) : events.map((event) => Buffer.from(event));
  for (const piece of pieces) {
    if (stopped()) return;
    res.write(piece);
    await (pauseMs ? sleep(pauseMs) : new Promise((resolve) => setImmediate(resolve)));
  }
}

function slices(buffer: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let start = 0; start < buffer.length; start += size) out.push(buffer.subarray(start, start + size));
  return out;
}

/** Splits text into up to `count` pieces without cutting a character, as models stream several tokens a delta. */
function pieces(text: string, count = 3): string[] {
  const characters = Array.from(text);
  const size = Math.max(1, Math.ceil(characters.length / count));
  const out: string[] = [];
  for (let start = 0; start < characters.length; start += size) out.push(characters.slice(start, start + size).join(''));
  return out;
}

function argumentText(call: FakeToolCall): string {
  return typeof call.input === 'string' ? call.input : JSON.stringify(call.input);
}

function dataEvent(data: unknown): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

function namedEvent(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

const openAiErrorTypes: Record<number, string> = { 400: 'invalid_request_error', 401: 'invalid_request_error', 404: 'invalid_request_error', 429: 'requests' };

const openAiProtocol: Protocol = {
  basePath: '/v1',
  modelPath: '/chat/completions',
  apiKeyOf: bearerToken,
  errorBody: (status, message) => ({ error: { message, type: openAiErrorTypes[status] ?? 'server_error', param: null, code: null } }),
  refusal(body) {
    if (typeof body?.model !== 'string' || !Array.isArray(body.messages)) return 'model and messages are required';
    if (body.stream !== true) return 'only streamed requests (stream: true) are scripted';
    return undefined;
  },
  events(reply, body, requestNumber) {
    const base = { id: `chatcmpl-fake-${requestNumber}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: body.model };
    const chunk = (delta: Record<string, unknown>, finishReason: string | null = null): string =>
      dataEvent({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] });
    const toolCalls = reply.toolCalls ?? [];
    const content = [chunk({ role: 'assistant', content: '' }), ...pieces(reply.text ?? '').map((piece) => chunk({ content: piece }))];
    toolCalls.forEach((call, index) => {
      const id = call.id ?? `call_fake_${requestNumber}_${index}`;
      content.push(chunk({ tool_calls: [{ index, id, type: 'function', function: { name: call.name, arguments: '' } }] }));
      for (const piece of pieces(argumentText(call), 4)) content.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    });
    const usage = reply.usage ?? DEFAULT_USAGE;
    const finish = [chunk({}, reply.stopReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'))];
    // As OpenAI does: a last chunk with no choices and the usage, only when asked for.
    if (body.stream_options?.include_usage === true) {
      finish.push(dataEvent({ ...base, choices: [], usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } }));
    }
    finish.push('data: [DONE]\n\n');
    return { content, finish, error: (error) => dataEvent({ error: { message: error.message, type: error.type, param: null, code: null } }) };
  },
};

const anthropicErrorTypes: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

const anthropicProtocol: Protocol = {
  basePath: '',
  modelPath: '/v1/messages',
  apiKeyOf: (headers) => (typeof headers['x-api-key'] === 'string' ? headers['x-api-key'] : undefined),
  errorBody: (status, message) => ({ type: 'error', error: { type: anthropicErrorTypes[status] ?? 'api_error', message } }),
  refusal(body) {
    if (typeof body?.model !== 'string' || !Array.isArray(body.messages)) return 'model and messages are required';
    if (typeof body.max_tokens !== 'number') return 'max_tokens: Field required';
    if (body.stream !== true) return 'only streamed requests (stream: true) are scripted';
    return undefined;
  },
  events(reply, body, requestNumber) {
    const usage = reply.usage ?? DEFAULT_USAGE;
    const toolCalls = reply.toolCalls ?? [];
    const content = [
      namedEvent('message_start', {
        message: {
          id: `msg_fake_${requestNumber}`,
          type: 'message',
          role: 'assistant',
          model: body.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: usage.input, output_tokens: 1 },
        },
      }),
      namedEvent('ping', {}),
    ];
    let index = 0;
    if (reply.text) {
      content.push(namedEvent('content_block_start', { index, content_block: { type: 'text', text: '' } }));
      for (const piece of pieces(reply.text)) content.push(namedEvent('content_block_delta', { index, delta: { type: 'text_delta', text: piece } }));
      content.push(namedEvent('content_block_stop', { index }));
      index++;
    }
    toolCalls.forEach((call, n) => {
      const id = call.id ?? `toolu_fake_${requestNumber}_${n}`;
      content.push(namedEvent('content_block_start', { index, content_block: { type: 'tool_use', id, name: call.name, input: {} } }));
      // Anthropic opens every tool input with an empty piece.
      for (const piece of ['', ...pieces(argumentText(call), 4)]) {
        content.push(namedEvent('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } }));
      }
      content.push(namedEvent('content_block_stop', { index }));
      index++;
    });
    const stopReason = reply.stopReason ?? (toolCalls.length > 0 ? 'tool_use' : 'end_turn');
    const finish = [
      namedEvent('message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: usage.output } }),
      namedEvent('message_stop', {}),
    ];
    return { content, finish, error: (error) => namedEvent('error', { error }) };
  },
};
