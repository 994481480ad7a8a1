import type { Pool } from '@berth/common';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';

export function systemRoutes(
  table: RouteTable,
  deps: { pool: Pool; metrics: Registry; openapi: () => Record<string, unknown>; ready: () => boolean },
): void {
  table.add(
    defineRoute({
      method: 'get',
      path: '/healthz',
      operationId: 'healthz',
      tag: 'System',
      summary: 'Liveness',
      description: 'Answers 200 while the process runs.',
      auth: false,
      responses: { 200: { description: 'alive', schema: z.object({ ok: z.literal(true) }) } },
      errors: [],
      handler: async () => ({ status: 200, body: { ok: true } }),
    }),
    defineRoute({
      method: 'get',
      path: '/readyz',
      operationId: 'readyz',
      tag: 'System',
      summary: 'Readiness',
      description: 'Answers 200 when the database answers and the controllers run, 503 otherwise.',
      auth: false,
      responses: {
        200: { description: 'ready', schema: z.object({ ok: z.boolean(), database: z.boolean(), controllers: z.boolean() }) },
        503: { description: 'not ready', schema: z.object({ ok: z.boolean(), database: z.boolean(), controllers: z.boolean() }) },
      },
      errors: [],
      handler: async () => {
        const database = await deps.pool.query('SELECT 1').then(
          () => true,
          () => false,
        );
        const controllers = deps.ready();
        const ok = database && controllers;
        return { status: ok ? 200 : 503, body: { ok, database, controllers } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/metrics',
      operationId: 'metrics',
      tag: 'System',
      summary: 'Prometheus metrics',
      description:
        'Prometheus text format (clean under `promtool check metrics`): `berth_build_info` (version, node_version), HTTP requests and latency by route and status (`berth_http_*`), agents of live keys by provider and phase (`berth_sandboxes`; test-key agents have no sandbox and are not counted), provision, checkpoint and exec latency (`berth_sandbox_provision_duration_seconds`, `berth_sandbox_checkpoint_duration_seconds`, `berth_exec_duration_seconds`), sandboxes that could not be ended (`berth_sandbox_release_failures_total`), controller reconciles, durations and queue depth (`berth_reconcile_*`, `berth_workqueue_depth`), runs (`berth_runner_*`), billing (`berth_billing_*`, `berth_ledger_charges_total`, `berth_compute_metered_seconds_total`, `berth_limit_pauses_total`), webhooks (`berth_webhook_*`), LISTEN connections (`berth_database_listener_connected`, `berth_database_listener_reconnects_total`), and the standard `process_*` and `nodejs_*` metrics.',
      auth: false,
      responses: { 200: { description: 'metrics', contentType: 'text/plain; version=0.0.4' } },
      errors: [],
      handler: async ({ res }) => {
        res.setHeader('Content-Type', deps.metrics.contentType);
        res.send(await deps.metrics.metrics());
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/openapi.json',
      operationId: 'openapi',
      tag: 'System',
      summary: 'This API, as OpenAPI 3.1',
      description: 'Generated from the same schemas that validate requests and shape responses.',
      auth: false,
      responses: { 200: { description: 'the OpenAPI document', contentType: 'application/json' } },
      errors: [],
      handler: async () => ({ status: 200, body: deps.openapi() }),
    }),
  );
}
