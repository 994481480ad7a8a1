import { ApiError, type ChannelLimits, type Clock, type Pool } from '@berth/common';
import { Counter, type Registry } from 'prom-client';

export const CHANNEL_LIMIT_WINDOW_MS = 60_000;
/** Windows older than this are pruned as new ones are counted. */
const KEEP_WINDOWS_MS = 60 * 60_000;
const PRUNE_EVERY = 200;

type LimitName = keyof ChannelLimits;

/**
 * Counts requests of the public channel routes in fixed one-minute windows in PostgreSQL, so the
 * limits hold across API replicas: one statement adds one to every counter a request touches and
 * returns their counts; over any limit is 429 `rate_limited` with the seconds to the window's end.
 */
export function createChannelLimiter(deps: { pool: Pool; clock: Clock; limits: ChannelLimits; metrics: Registry }) {
  const refusals = new Counter({
    name: 'berth_channel_limit_refusals_total',
    help: 'Requests to public channel routes refused with 429, by the limit they went over',
    labelNames: ['limit'],
    registers: [deps.metrics],
  });
  let counted = 0;

  async function count(keys: { limit: LimitName; key: string }[]): Promise<void> {
    const now = deps.clock.now().getTime();
    const windowStart = Math.floor(now / CHANNEL_LIMIT_WINDOW_MS) * CHANNEL_LIMIT_WINDOW_MS;
    const buckets = keys.map(({ limit, key }) => `${limit}:${key}`);
    const { rows } = await deps.pool.query<{ bucket: string; count: number }>(
      `INSERT INTO channel_rate_windows (bucket, window_start, count) SELECT bucket, $2, 1 FROM unnest($1::text[]) AS bucket
       ON CONFLICT (bucket, window_start) DO UPDATE SET count = channel_rate_windows.count + 1 RETURNING bucket, count`,
      [buckets, new Date(windowStart)],
    );
    if (++counted % PRUNE_EVERY === 0) {
      await deps.pool.query('DELETE FROM channel_rate_windows WHERE window_start < $1', [new Date(now - KEEP_WINDOWS_MS)]);
    }
    for (const { limit, key } of keys) {
      const used = rows.find((row) => row.bucket === `${limit}:${key}`)?.count ?? 0;
      if (used <= deps.limits[limit]) continue;
      refusals.inc({ limit });
      const retryAfter = Math.max(1, Math.ceil((windowStart + CHANNEL_LIMIT_WINDOW_MS - now) / 1000));
      throw new ApiError('rate_limited', `too many requests: at most ${deps.limits[limit]} a minute (${limit}); try again in ${retryAfter} s`, {
        retryAfter,
        limit,
        max: deps.limits[limit],
      });
    }
  }

  return {
    /** A message from a visitor of a channel, from an IP address. */
    message: (channelId: string, visitorId: string, ip: string) =>
      count([
        { limit: 'channelMessages', key: channelId },
        { limit: 'visitorMessages', key: `${channelId}:${visitorId}` },
        { limit: 'ipMessages', key: ip },
      ]),
    /** A read of history, stream or configuration from an IP address. */
    read: (ip: string) => count([{ limit: 'ipReads', key: ip }]),
  };
}

export type ChannelLimiter = ReturnType<typeof createChannelLimiter>;
