import type { Pool } from '@berth/common';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import { requestOrigin } from '../http/origin.js';
import { defineRoute, type RouteTable } from '../http/route.js';

const readiness = z.object({ ok: z.boolean(), database: z.boolean(), controllers: z.boolean() }).meta({ id: 'Readiness' });

export function systemRoutes(
  table: RouteTable,
  deps: { pool: Pool; metrics: Registry; openapi: (requestOrigin: string | undefined) => Record<string, unknown>; ready: () => boolean },
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
      responses: { 200: { description: 'alive', schema: z.object({ ok: z.literal(true) }), example: { ok: true } } },
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
        200: { description: 'ready', schema: readiness, example: { ok: true, database: true, controllers: true } },
        503: { description: 'not ready', schema: readiness, example: { ok: false, database: true, controllers: false } },
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
        'Prometheus text format (clean under `promtool check metrics`): `berth_build_info` (version, node_version), HTTP requests and latency by route and status (`berth_http_*`), agents of live keys by provider and phase (`berth_sandboxes`; test-key agents have no sandbox and are not counted), provision, checkpoint and exec latency (`berth_sandbox_provision_duration_seconds`, `berth_sandbox_checkpoint_duration_seconds`, `berth_exec_duration_seconds`), sandboxes that could not be ended (`berth_sandbox_release_failures_total`), controller reconciles, durations and queue depth (`berth_reconcile_*`, `berth_workqueue_depth`), runs (`berth_runner_*`), billing (`berth_billing_*`, `berth_ledger_charges_total`, `berth_compute_metered_seconds_total`, `berth_limit_pauses_total`), webhooks (`berth_webhook_*`), approvals (`berth_approval_decisions_total` by outcome here; `berth_runner_approvals_total` by outcome and `berth_runner_guardrail_hits_total` by rule and action in the runners), LISTEN connections (`berth_database_listener_connected`, `berth_database_listener_reconnects_total`), and the standard `process_*` and `nodejs_*` metrics.',
      auth: false,
      responses: {
        200: {
          description: 'metrics',
          contentType: 'text/plain; version=0.0.4',
          example: '# HELP berth_sandboxes Agents by provider and phase\n# TYPE berth_sandboxes gauge\nberth_sandboxes{provider="local",phase="idle"} 2\n',
        },
      },
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
      responses: {
        200: {
          description: 'the OpenAPI document',
          schema: z.looseObject({ openapi: z.string(), info: z.looseObject({ title: z.string(), version: z.string() }), paths: z.record(z.string(), z.unknown()) }),
          example: { openapi: '3.1.0', info: { title: 'Berth API', version: '0.1.0' }, paths: {} },
        },
      },
      errors: [],
      handler: async ({ req }) => ({ status: 200, body: deps.openapi(requestOrigin(req)) }),
    }),
  );
}
