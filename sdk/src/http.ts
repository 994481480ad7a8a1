import { BerthApiError, BerthConnectionError, BerthError, BerthTimeoutError, envelopeOf } from './errors.js';
import { DEFAULT_RETRY_POLICY, parseRetryAfter, retryableStatus, retryDelayMs, sleep, type RetryPolicy } from './retry.js';

export interface BerthOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:8080` (default: the BERTH_URL environment variable). */
  url?: string;
  /** An API key, `svc_live_…` or `svc_test_…` (default: BERTH_API_KEY). */
  apiKey?: string;
  /** How long one try may take before it is abandoned, in ms (default 60 s; exec adds its own timeout). */
  timeoutMs?: number;
  /** Retries of 429, 5xx and network errors (ADR 43); `{ maxRetries: 0 }` turns them off. */
  retry?: Partial<RetryPolicy>;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
}

/** Per call: an AbortSignal, and limits that override the client's. */
export interface RequestOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
  maxRetries?: number;
}

export type Query = Record<string, string | number | boolean | string[] | undefined>;

export interface RequestSpec extends RequestOptions {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  query?: Query;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as it is (`application/octet-stream` unless `headers` say otherwise); a stream is sent once, never retried. */
  rawBody?: RawBody;
  /** Safe to repeat after a 5xx or a lost connection (GET, PUT, DELETE are). */
  idempotent?: boolean;
  headers?: Record<string, string>;
}

/** Bytes to send as a request's body: whole, or a stream read as it is sent. */
export type RawBody = string | Uint8Array | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

/** Whether a body can be read only once (a retry could not send it again). */
function isStream(body: RawBody): boolean {
  return typeof body !== 'string' && !(body instanceof Uint8Array) && !(typeof Blob !== 'undefined' && body instanceof Blob);
}

/** Connection failures where the request never reached the server, so even a POST may be sent again. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);

const DEFAULT_TIMEOUT_MS = 60_000;

function environment(name: string): string | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name] || undefined;
}

/** What was sent where: the transport of every call, with retries, timeouts and typed errors. */
export class Transport {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly retry: RetryPolicy;
  /** How long one try may take, in ms, unless a call says otherwise. */
  readonly timeoutMs: number;
  private readonly headers: Record<string, string>;
  private readonly fetch: typeof fetch;

  constructor(options: BerthOptions = {}) {
    const url = options.url ?? environment('BERTH_URL');
    const apiKey = options.apiKey ?? environment('BERTH_API_KEY');
    if (!url) throw new BerthError('no Berth URL: pass { url } or set BERTH_URL');
    if (!apiKey) throw new BerthError('no API key: pass { apiKey } or set BERTH_API_KEY');
    this.baseUrl = url.replace(/\/+$/, '');
    this.apiKey = apiKey;
    this.retry = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.headers = options.headers ?? {};
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  url(path: string, query?: Query): string {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) search.append(name, String(one));
    }
    const text = search.toString();
    return `${this.baseUrl}${path}${text ? `?${text}` : ''}`;
  }

  /** A request sent as it is, with the client's fetch (no retries, no error mapping): for URLs the API hands out. */
  fetchUrl(url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    for (const [name, value] of Object.entries(this.headers)) if (!headers.has(name)) headers.set(name, value);
    headers.set('authorization', `Bearer ${this.apiKey}`);
    return this.fetch(url, { ...init, headers });
  }

  /** A JSON call: the parsed body of a 2xx answer, or a thrown BerthError. */
  async request<T>(spec: RequestSpec): Promise<T> {
    return this.send(spec, async (response) => {
      const text = await response.text();
      return (text && (response.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text) as T;
    });
  }

  /** A streaming call: the 2xx Response once its headers arrived (the time limit covers only that). */
  async open(spec: RequestSpec & { accept?: string }): Promise<Response> {
    return this.send(spec, async (response) => response, { stream: true });
  }

  private async send<T>(spec: RequestSpec & { accept?: string }, read: (response: Response) => Promise<T>, mode: { stream?: boolean } = {}): Promise<T> {
    const once = spec.rawBody !== undefined && isStream(spec.rawBody);
    const maxRetries = once ? 0 : (spec.maxRetries ?? this.retry.maxRetries);
    const idempotent = spec.idempotent ?? (spec.method === 'GET' || spec.method === 'PUT' || spec.method === 'DELETE');
    const headers: Record<string, string> = {
      ...this.headers,
      authorization: `Bearer ${this.apiKey}`,
      accept: spec.accept ?? 'application/json',
      ...(spec.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(spec.rawBody !== undefined ? { 'content-type': 'application/octet-stream' } : {}),
      ...spec.headers,
    };
    for (let attempt = 0; ; attempt++) {
      const controller = new AbortController();
      const onAbort = () => controller.abort(spec.signal!.reason);
      if (spec.signal?.aborted) throw spec.signal.reason;
      spec.signal?.addEventListener('abort', onAbort, { once: true });
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, spec.timeoutMs ?? this.timeoutMs);
      let failure: BerthError;
      let waitMs: number | undefined;
      let handedOver = false;
      try {
        const response = await this.fetch(this.url(spec.path, spec.query), {
          method: spec.method,
          headers,
          ...(spec.body !== undefined ? { body: JSON.stringify(spec.body) } : {}),
          // A stream goes out as it is read (`duplex: 'half'`, which Node's fetch needs for one).
          ...(spec.rawBody !== undefined ? ({ body: spec.rawBody, ...(once ? { duplex: 'half' } : {}) } as RequestInit) : {}),
          signal: controller.signal,
        });
        if (response.ok) {
          // A stream outlives this call: the caller's signal keeps aborting it.
          handedOver = mode.stream === true;
          return await read(response);
        }
        const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
        const body = await response.text();
        failure = new BerthApiError(response.status, envelopeOf(response.status, body, response.headers.get('x-request-id')), retryAfterMs === undefined ? undefined : retryAfterMs / 1000);
        if (!retryableStatus(response.status, idempotent) || attempt >= maxRetries) throw failure;
        waitMs = retryDelayMs(attempt, retryAfterMs, this.retry);
        if (waitMs === undefined) throw failure;
      } catch (error) {
        if (error instanceof BerthError) throw error;
        if (spec.signal?.aborted) throw spec.signal.reason;
        const cause = (error as { cause?: { code?: string } }).cause;
        failure = timedOut
          ? new BerthTimeoutError(`${spec.method} ${spec.path}: no answer within ${spec.timeoutMs ?? this.timeoutMs} ms`)
          : new BerthConnectionError(`${spec.method} ${spec.path}: ${cause?.code ?? (error as Error).message}`, { cause: error });
        const safe = idempotent || (!timedOut && NOT_SENT.has(cause?.code ?? ''));
        if (!safe || attempt >= maxRetries) throw failure;
        waitMs = retryDelayMs(attempt, undefined, this.retry)!;
      } finally {
        clearTimeout(timer);
        if (!handedOver) spec.signal?.removeEventListener('abort', onAbort);
      }
      await sleep(waitMs, spec.signal);
    }
  }
}
