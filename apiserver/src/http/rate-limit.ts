import {
  ApiError,
  LATENCY_BUCKETS,
  PLANS,
  RATE_LIMIT_WINDOW_SECONDS,
  findApiKeyTakingRateLimit,
  takeRateLimit,
  type ApiKeyRecord,
  type Clock,
  type PlanSettings,
  type Principal,
  type Queryable,
  type RateLimitDecision,
} from '@berth/common';
import type { Response } from 'express';
import { Counter, Histogram, type Registry } from 'prom-client';

/**
 * The headers of every keyed `/v1` response, in the form of the IETF draft "RateLimit header
 * fields for HTTP" (draft-ietf-httpapi-ratelimit-headers-06, the separate-fields form):
 * `RateLimit-Limit` (requests per window), `RateLimit-Remaining`, `RateLimit-Reset` (seconds
 * until the oldest counted request leaves the window) and `RateLimit-Policy` (`60;w=60`).
 */
export const RATE_LIMIT_HEADERS = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'RateLimit-Policy'] as const;

export interface RateLimiter {
  /** Counts the request of a key; sets the headers, and throws `rate_limited` when over the plan's limit. */
  admit(principal: Principal, res: Response): Promise<void>;
  /**
   * The record of an API key, with its request counted as `admit` counts it in the same round
   * trip when the key is not revoked (undefined: no such key). `admit` of the answer sets the
   * headers and throws `rate_limited` when over the limit; it is to be called once the key was
   * found valid (a revoked key's request was not counted, and `admit` does nothing for it).
   */
  findKey(key: string): Promise<{ record: ApiKeyRecord; admit: (res: Response) => void } | undefined>;
}

export function createRateLimiter(deps: { db: Queryable; clock: Clock; plans: PlanSettings; metrics: Registry }): RateLimiter {
  const requests = new Counter({
    name: 'berth_rate_limit_requests_total',
    help: 'Keyed /v1 requests by plan and whether the rate limit admitted them (result admitted | limited)',
    labelNames: ['plan', 'result'],
    registers: [deps.metrics],
  });
  const checkDuration = new Histogram({
    name: 'berth_rate_limit_check_duration_seconds',
    help: 'Time spent counting a request in its key\'s window (one database round trip, which on /v1 also finds the key)',
    buckets: LATENCY_BUCKETS,
    registers: [deps.metrics],
  });
  for (const plan of PLANS) {
    requests.inc({ plan, result: 'admitted' }, 0);
    requests.inc({ plan, result: 'limited' }, 0);
  }
  /** Counts the decision, sets the headers, and throws `rate_limited` when it refused the request. */
  function apply(decision: RateLimitDecision, res: Response): void {
    requests.inc({ plan: decision.plan, result: decision.allowed ? 'admitted' : 'limited' });
    res.setHeader('RateLimit-Limit', String(decision.limit));
    res.setHeader('RateLimit-Remaining', String(Math.max(0, decision.limit - decision.used)));
    res.setHeader('RateLimit-Reset', String(Math.ceil(decision.resetMs / 1000)));
    res.setHeader('RateLimit-Policy', `${decision.limit};w=${RATE_LIMIT_WINDOW_SECONDS}`);
    if (!decision.allowed) {
      const retryAfter = Math.max(1, Math.ceil(decision.retryMs / 1000));
      throw new ApiError('rate_limited', `the ${decision.plan} plan allows ${decision.limit} requests a minute per API key; retry in ${retryAfter} s`, {
        retryAfter,
        plan: decision.plan,
        limit: decision.limit,
        windowSeconds: RATE_LIMIT_WINDOW_SECONDS,
      });
    }
  }
  return {
    async admit(principal, res) {
      const stop = checkDuration.startTimer();
      const decision = await takeRateLimit(deps.db, {
        keyId: principal.keyId,
        organizationId: principal.organizationId,
        now: deps.clock.now(),
        settings: deps.plans,
      });
      stop();
      apply(decision, res);
    },
    async findKey(key) {
      const stop = checkDuration.startTimer();
      const found = await findApiKeyTakingRateLimit(deps.db, key, { now: deps.clock.now(), settings: deps.plans });
      stop();
      if (!found) return undefined;
      const { record, decision } = found;
      return {
        record,
        admit: (res) => {
          if (decision) apply(decision, res);
        },
      };
    },
  };
}
