/**
 * What both model adapters share about talking to a vendor's streaming HTTP API: the POST,
 * its failures as `ModelError`, and the server-sent events of the answer.
 */
import { ModelError, type ToolCall } from './types.js';

/** One request to an upstream, with what is needed to report its failures. */
export interface UpstreamCall {
  /** Names the upstream in error messages, e.g. `Anthropic API at api.anthropic.com`. */
  label: string;
  url: URL;
  headers: Record<string, string>;
  body: unknown;
  signal: AbortSignal | undefined;
  /** Removed from every error message, in case an upstream echoes it. */
  apiKey: string | undefined;
  /** The vendor's error message from a JSON error body, if it has one. */
  errorDetail(body: unknown): string | undefined;
}

/** Joins a base URL (with or without a trailing slash) and a path; a malformed base is a configuration error. */
export function endpointUrl(baseUrl: string, path: string): URL {
  try {
    return new URL(`${baseUrl.replace(/\/+$/, '')}${path}`);
  } catch {
    throw new ModelError(`invalid model API base URL: ${JSON.stringify(baseUrl)}`, 0, false);
  }
}

/** 408 and 409 are the vendors' "try again" conflicts, 429 is a rate limit, 5xx (with Anthropic's 529) are theirs. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/**
 * How long the upstream asks us to wait: `Retry-After` in seconds or as an HTTP date. OpenAI
 * also sends the non-standard, more precise `retry-after-ms`, which wins when present.
 */
export function retryAfterMs(headers: Headers, now = Date.now()): number | undefined {
  const milliseconds = Number(headers.get('retry-after-ms') ?? Number.NaN);
  if (Number.isFinite(milliseconds) && milliseconds >= 0) return milliseconds;
  const value = headers.get('retry-after')?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number(value) * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** A `ModelError` whose message can never carry the API key. */
export function upstreamError(call: UpstreamCall, message: string, status: number, retryable: boolean, retryAfter?: number): ModelError {
  const safe = call.apiKey ? message.replaceAll(call.apiKey, '[redacted]') : message;
  return new ModelError(safe, status, retryable, retryAfter);
}

/**
 * POSTs the call and returns the 2xx response whose body is the stream. Throws the abort
 * error itself when `signal` aborts, a `ModelError` for everything else.
 */
export async function postForStream(call: UpstreamCall): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(call.url, { method: 'POST', headers: call.headers, body: JSON.stringify(call.body), signal: call.signal });
  } catch (error) {
    throw networkFailure(call, error);
  }
  if (!response.ok) throw await errorResponse(call, response);
  if (!response.body) throw upstreamError(call, `${call.label} answered HTTP ${response.status} without a body`, 0, true);
  return response;
}

async function errorResponse(call: UpstreamCall, response: Response): Promise<ModelError> {
  const text = await response.text().catch(() => '');
  const detail = errorDetailOf(call, text);
  const message = `${call.label} answered HTTP ${response.status}${detail ? `: ${detail}` : ''}`;
  return upstreamError(call, message, response.status, isRetryableStatus(response.status), retryAfterMs(response.headers));
}

/** The vendor's own message when the body is its JSON error; otherwise the start of the body (a proxy's page, say). */
function errorDetailOf(call: UpstreamCall, text: string): string {
  try {
    const detail = call.errorDetail(JSON.parse(text));
    if (detail) return detail;
  } catch {
    // Not JSON: fall through to the raw text.
  }
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > 200 ? `${flat.slice(0, 200)}...` : flat;
}

/** An abort stays the caller's abort error; any other failure to talk is "no answer" (status 0), worth a retry. */
function networkFailure(call: UpstreamCall, error: unknown): unknown {
  if (call.signal?.aborted) return error;
  return upstreamError(call, `cannot reach ${call.label}: ${describeNetworkError(error)}`, 0, true);
}

/** undici reports `TypeError: fetch failed` and hides the useful part (ECONNREFUSED, ...) in `cause`. */
function describeNetworkError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause as { code?: unknown; message?: unknown } | undefined;
  if (typeof cause?.code === 'string') return cause.code;
  if (typeof cause?.message === 'string' && cause.message) return cause.message;
  return error.message;
}

/** One server-sent event; `event` is absent when the server named none (OpenAI never does). */
export interface SseEvent {
  event?: string;
  data: string;
}

/**
 * Splits a text stream into server-sent events (WHATWG HTML, "event stream interpretation").
 * Chunks may end anywhere, even between the `\r` and `\n` of one line ending.
 */
export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private event: string | undefined;

  push(chunk: string): SseEvent[] {
    this.buffer += chunk;
    const events: SseEvent[] = [];
    let start = 0;
    const lineEnd = /\r\n|\r|\n/g;
    for (let match = lineEnd.exec(this.buffer); match; match = lineEnd.exec(this.buffer)) {
      // A `\r` as the last character may be the first half of `\r\n`: wait for the next chunk.
      if (match[0] === '\r' && match.index === this.buffer.length - 1) break;
      const event = this.line(this.buffer.slice(start, match.index));
      if (event) events.push(event);
      start = match.index + match[0].length;
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  private line(line: string): SseEvent | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    if (field === 'event') this.event = value;
    return undefined;
  }

  private dispatch(): SseEvent | undefined {
    const event = this.data.length === 0 ? undefined : { ...(this.event === undefined ? {} : { event: this.event }), data: this.data.join('\n') };
    this.data = [];
    this.event = undefined;
    return event;
  }
}

/**
 * The events of a streamed answer, in order. An event still open when the stream ends is
 * dropped (as the SSE rules say), so a cut connection shows as a missing final event.
 * Stops with the abort error as soon as the signal aborts, even with data already buffered.
 */
export async function* sseEvents(call: UpstreamCall, response: Response): AsyncGenerator<SseEvent> {
  const parser = new SseParser();
  const decoder = new TextDecoder();
  try {
    for await (const chunk of response.body ?? []) {
      for (const event of parser.push(decoder.decode(chunk, { stream: true }))) {
        call.signal?.throwIfAborted();
        yield event;
      }
    }
  } catch (error) {
    if (call.signal?.aborted || error instanceof ModelError) throw error;
    throw upstreamError(call, `${call.label} broke off its answer: ${describeNetworkError(error)}`, 0, true);
  }
  call.signal?.throwIfAborted();
}

/** An event's data as JSON; anything else means the answer is garbled, which a retry may fix. */
export function eventJson(call: UpstreamCall, event: SseEvent): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(event.data);
    if (isObject(value)) return value;
  } catch {
    // Reported below.
  }
  throw upstreamError(call, `${call.label} sent a malformed stream event: ${event.data.slice(0, 200)}`, 0, true);
}

export function streamEndedEarly(call: UpstreamCall): ModelError {
  return upstreamError(call, `${call.label}: stream ended early, before its final event`, 0, true);
}

/**
 * Parses streamed tool arguments. Nothing (or only whitespace) means no arguments: `{}`.
 * Anything that is not a JSON object becomes `input: {}` with the raw text in `invalidInput`,
 * so the loop can tell the model instead of the adapter failing the whole turn.
 */
export function parseToolInput(raw: string): Pick<ToolCall, 'input' | 'invalidInput'> {
  if (raw.trim() === '') return { input: {} };
  try {
    const value: unknown = JSON.parse(raw);
    if (isObject(value)) return { input: value };
  } catch {
    // Reported through invalidInput.
  }
  return { input: {}, invalidInput: raw };
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A string field of a JSON object, if it is one. */
export function stringField(value: unknown, key: string): string | undefined {
  if (!isObject(value)) return undefined;
  const field = value[key];
  return typeof field === 'string' ? field : undefined;
}

/** A number field of a JSON object, if it is one. */
export function numberField(value: unknown, key: string): number | undefined {
  if (!isObject(value)) return undefined;
  const field = value[key];
  return typeof field === 'number' && Number.isFinite(field) ? field : undefined;
}
