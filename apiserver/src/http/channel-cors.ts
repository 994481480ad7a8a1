import { ApiError, findChannel, type Pool } from '@berth/common';
import express, { type Router } from 'express';

/** Paths a browser calls: the widget's routes. Inbound webhooks are server to server and get no CORS. */
const BROWSER_PATHS = ['/channels/:channelId/config', '/channels/:channelId/messages', '/channels/:channelId/stream'];

/**
 * CORS for the public chat routes, per channel: a request from a browser (it has `Origin`) is let
 * through, and answered with `Access-Control-Allow-Origin`, when its origin is in the channel's
 * `allowedOrigins` or that list is empty; otherwise it is 403 `forbidden`, its preflight too. A
 * preflight is answered here (204); a request of an unknown channel goes on to its 404.
 */
export function channelCors(pool: Pool): Router {
  const router = express.Router();
  router.use(BROWSER_PATHS, async (req, res, next) => {
    const origin = req.get('origin');
    if (origin === undefined) return next();
    const channel = await findChannel(pool, req.params.channelId as string);
    if (!channel) return next();
    if (channel.allowedOrigins.length > 0 && !channel.allowedOrigins.includes(origin)) {
      throw new ApiError('forbidden', `origin ${origin} may not use this channel; add it to the channel's allowedOrigins`, { origin });
    }
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Vary', 'Origin');
    if (req.method !== 'OPTIONS') return next();
    res.setHeader('Access-Control-Allow-Methods', 'GET, POST');
    res.setHeader('Access-Control-Allow-Headers', 'content-type, last-event-id');
    res.setHeader('Access-Control-Max-Age', '600');
    res.status(204).end();
  });
  return router;
}
