import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, PostgresResourceStore, createPool, migrate, silentLogger, type Pool, type Resource } from '../../common/src/index.js';
import { Controller, createControllerMetrics, type ReconcileResult } from '../../operator/src/runtime/controller.js';
import { createTestDatabase } from '../helpers/postgres.js';

/**
 * The controller runtime against the real PostgreSQL store: which watch events reconcile an
 * object again after a reconcile that wrote its status.
 */
let pool: Pool;
let store: PostgresResourceStore;
const clock = new ManualClock('2026-05-01T09:00:00Z');

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  pool = createPool(databaseUrl);
  await migrate(pool);
  store = new PostgresResourceStore(pool, { connectionString: databaseUrl, clock, log: silentLogger });
});
afterAll(async () => {
  await store.close();
  await pool.end();
});

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * A controller of Sessions whose reconcile writes the status once (a counter of its reconciles)
 * and reports that write as its own when `report` says so.
 */
async function startCounting(report: boolean): Promise<{ controller: Controller; reconciled: Map<string, number>; registry: Registry }> {
  const reconciled = new Map<string, number>();
  const registry = new Registry();
  const controller = new Controller({
    kind: 'Session',
    store,
    log: silentLogger,
    metrics: createControllerMetrics(registry),
    reconcile: async (name): Promise<ReconcileResult> => {
      const count = (reconciled.get(name) ?? 0) + 1;
      reconciled.set(name, count);
      if (count > 1) return {};
      const written = await store.updateStatus('Session', name, { reconciles: count } as unknown as Resource<'Session'>['status'] & object);
      return report ? { wroteVersion: written.metadata.resourceVersion } : {};
    },
  });
  await controller.start();
  return { controller, reconciled, registry };
}

async function newSession(name: string): Promise<void> {
  await store.create('Session', { name, spec: { organizationId: 'org_test', mode: 'live', userId: 'u1' } as unknown as Resource<'Session'>['spec'] });
}

describe('a reconcile that writes its object', () => {
  it('is not run again for its own write, and is for any other change', async () => {
    const { controller, reconciled, registry } = await startCounting(true);
    try {
      await newSession('ses-own-write');
      await until(() => reconciled.get('ses-own-write') === 1, 'the first reconcile');
      // Its own status write was heard during the reconcile: no second one comes of it.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(reconciled.get('ses-own-write')).toBe(1);
      expect((await registry.getSingleMetric('berth_reconcile_own_writes_total')!.get()).values).toEqual([{ labels: { kind: 'Session' }, value: 1 }]);

      // A write by anyone else is a change: reconciled again.
      await store.updateSpec('Session', 'ses-own-write', (current) => ({ ...current.spec, userId: 'u2' }));
      await until(() => reconciled.get('ses-own-write') === 2, 'the reconcile after a change of the spec');
    } finally {
      await controller.stop();
    }
  });

  it('is run again for its write when it does not report it as its own', async () => {
    const { controller, reconciled } = await startCounting(false);
    try {
      await newSession('ses-unreported-write');
      await until(() => reconciled.get('ses-unreported-write') === 2, 'the reconcile its own write asked for');
    } finally {
      await controller.stop();
    }
  });
});
