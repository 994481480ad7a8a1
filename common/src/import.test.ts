import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Runs in a fresh Node.js process: loads the dependencies of @berth/common first (what they do
 * at import is theirs), then watches what importing @berth/common itself does to the process.
 */
const PROBE = `
const pg = (await import('pg')).default;
const prom = await import('prom-client');
await import('pino');
await import('zod');
await import('@berth/crds');
const EVENTS = ['exit', 'beforeExit', 'SIGINT', 'SIGTERM', 'uncaughtException', 'unhandledRejection', 'warning'];
const OIDS = [16, 20, 700, 701, 1082, 1114, 1184, 1700, 3802];
const snapshot = () => ({
  listeners: Object.fromEntries(EVENTS.map((event) => [event, process.listenerCount(event)])),
  resources: process.getActiveResourcesInfo().filter((kind) => kind !== 'CloseReq').sort(),
  parsers: OIDS.map((oid) => String(pg.types.getTypeParser(oid, 'text'))),
});
const before = snapshot();
// tsx, which compiles the sources as they load, reads these for every module it loads.
const LOADER_VARIABLES = new Set(['NODE_V8_COVERAGE', 'WATCH_REPORT_DEPENDENCIES']);
const envRead = new Set();
const env = process.env;
process.env = new Proxy(env, { get: (target, key) => (typeof key === 'string' && !LOADER_VARIABLES.has(key) && envRead.add(key), target[key]) });
await import('@berth/common');
process.env = env;
const after = snapshot();
process.stdout.write(JSON.stringify({ before, after, envRead: [...envRead], metrics: prom.register.getMetricsAsArray().map((metric) => metric.name) }));
`;

describe('importing @berth/common', () => {
  it('does nothing to the process: no metrics, listeners, handles, type parsers or environment reads, and lets it exit', () => {
    const started = performance.now();
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--conditions=source', '--input-type=module', '--eval', PROBE], {
      cwd: PACKAGE_DIR,
      encoding: 'utf8',
      timeout: 30_000,
    });
    const exitedWithinMs = performance.now() - started;
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    const report = JSON.parse(child.stdout) as { before: unknown; after: unknown; envRead: string[]; metrics: string[] };
    expect(report.metrics).toEqual([]);
    expect(report.envRead).toEqual([]);
    expect(report.after).toEqual(report.before);
    // Nothing keeps the event loop alive: the process ends once the probe has written its report.
    expect(exitedWithinMs).toBeLessThan(15_000);
  });
});
