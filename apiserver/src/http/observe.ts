import { LATENCY_BUCKETS, newId, type Logger } from '@berth/common';
import type { RequestHandler } from 'express';
import { Counter, Histogram, type Registry } from 'prom-client';

/**
 * Gives every request an id (`req_…`, echoed in `X-Request-Id` and every error), a logger
 * that carries it, and counts it by route pattern and status when it finishes.
 */
export function observeRequests(log: Logger, registry: Registry): RequestHandler {
  const requests = new Counter({
    name: 'berth_http_requests_total',
    help: 'HTTP requests by method, route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'berth_http_request_duration_seconds',
    help: 'HTTP request latency by method, route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  return (req, res, next) => {
    const started = performance.now();
    req.requestId = newId('req');
    req.log = log.child({ requestId: req.requestId });
    res.setHeader('X-Request-Id', req.requestId);
    res.on('finish', () => {
      // The route pattern, not the path: ids in paths would make one series per object.
      const route = req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
      const labels = { method: req.method, route, status: String(res.statusCode) };
      const seconds = (performance.now() - started) / 1000;
      requests.inc(labels);
      duration.observe(labels, seconds);
      req.log.info({ method: req.method, route, path: req.path, status: res.statusCode, ms: Math.round(seconds * 1000) }, 'request');
    });
    next();
  };
}
