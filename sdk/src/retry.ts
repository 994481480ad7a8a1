/** When and how long to wait before trying a request again (ADR 43). */
export interface RetryPolicy {
  /** Tries after the first (default 3). */
  maxRetries: number;
  /** The first backoff's ceiling in ms (default 500); each retry doubles it. */
  baseDelayMs: number;
  /** The largest backoff in ms (default 20 s). */
  maxDelayMs: number;
  /** A `Retry-After` longer than this (ms) is not waited for: the error is thrown (default 60 s). */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxRetries: 3, baseDelayMs: 500, maxDelayMs: 20_000, maxRetryAfterMs: 60_000 };

/** Statuses worth another try: the server was busy, or failed before or while answering. */
const TRANSIENT = new Set([408, 429, 500, 502, 503, 504]);

/**
 * Whether an answer may be tried again. A 429 always may: the rate limiter answers before any
 * route runs, so nothing was done. Other transient statuses only for a request that is safe to
 * repeat (GET, PUT, DELETE, and the POSTs the API makes idempotent).
 */
export function retryableStatus(status: number, idempotent: boolean): boolean {
  if (status === 429) return true;
  return idempotent && TRANSIENT.has(status);
}

/** `Retry-After` in ms: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(header: string | null | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * The wait before retry number `attempt` (0 for the first retry): the server's `Retry-After`
 * when it gave one (plus up to 10 % so that clients told the same second do not return together),
 * else "full jitter" exponential backoff, a random time up to min(max, base · 2^attempt).
 * Undefined: do not retry (the server asked for longer than `maxRetryAfterMs`).
 */
export function retryDelayMs(attempt: number, retryAfterMs: number | undefined, policy: RetryPolicy, random: () => number = Math.random): number | undefined {
  if (retryAfterMs !== undefined) {
    if (retryAfterMs > policy.maxRetryAfterMs) return undefined;
    return Math.round(retryAfterMs + retryAfterMs * 0.1 * random());
  }
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
  return Math.round(ceiling * random());
}

/**
 * Resolves after `ms` (with false), or rejects with the signal's reason when it is aborted first.
 * With `wake`, resolves early (with true) when that promise settles first.
 */
export function sleep(ms: number, signal?: AbortSignal, wake?: Promise<unknown>): Promise<boolean> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const settle = (early: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(early);
    };
    const timer = setTimeout(() => settle(false), ms);
    signal?.addEventListener('abort', onAbort, { once: true });
    void wake?.then(() => settle(true));
  });
}
