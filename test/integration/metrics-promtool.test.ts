import { spawnSync } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { eventually } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * /metrics of a real `berth up`, after it has served requests, provisioned a live sandbox and
 * run an exec and a test-key agent, checked by Prometheus's own linter. promtool comes with
 * `make host` (sandbox-images/local/install-host.sh).
 */
let berth: BerthProcess;
let db: pg.Pool;

function promtoolCheck(exposition: string): { status: number | null; output: string } {
  const result = spawnSync('promtool', ['check', 'metrics'], { input: exposition, encoding: 'utf8' });
  if (result.error) throw new Error(`promtool is needed for this test (make host installs it): ${result.error.message}`);
  return { status: result.status, output: `${result.stdout}${result.stderr}`.trim() };
}

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({ env: { DATABASE_URL: databaseUrl } });
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await db.end();
});

describe('/metrics', () => {
  it('passes promtool check metrics, with build info and live sandboxes only', async () => {
    const live = berth.api(berth.liveKey);
    const test = berth.api(berth.testKey);
    const liveSession = (await live.post('/v1/sessions', { userId: 'metrics' })).body.id;
    const liveAgent = (await live.post(`/v1/sessions/${liveSession}/agents`, { timeout: '5m' })).body.id;
    expect((await live.post(`/v1/agents/${liveAgent}/exec`, { language: 'bash', code: 'echo hi' })).body.stdout).toBe('hi\n');
    const testSession = (await test.post('/v1/sessions', { userId: 'metrics' })).body.id;
    const testAgent = (await test.post(`/v1/sessions/${testSession}/agents`, {})).body.id;
    await eventually(async () => ((await test.get(`/v1/agents/${testAgent}`)).body.status === 'idle' ? true : undefined), { what: 'the test agent idle' });
    await live.get('/v1/agents/agt_doesnotexist');

    const exposition = await (await fetch(`${berth.baseUrl}/metrics`)).text();
    const check = promtoolCheck(exposition);
    expect(check.output).toBe('');
    expect(check.status).toBe(0);

    const samples = parsePrometheus(exposition);
    const info = samples.find((sample) => sample.name === 'berth_build_info');
    expect(info).toMatchObject({ value: 1, labels: { version: expect.stringMatching(/^\d+\.\d+\.\d+/), node_version: process.versions.node } });
    expect(samples.some((sample) => sample.name === 'process_cpu_seconds_total')).toBe(true);
    expect(samples.some((sample) => sample.name.startsWith('berth_process_') || sample.name.startsWith('berth_nodejs_'))).toBe(false);
    // One live agent with its sandbox; the test-key agent (idle on the mock) is not a sandbox.
    expect(metricValue(samples, 'berth_sandboxes', { phase: 'idle' })).toBe(1);
    expect(metricValue(samples, 'berth_sandboxes', { provider: 'local', phase: 'idle' })).toBe(1);
    expect(samples.some((sample) => sample.name === 'berth_compute_metered_seconds_total')).toBe(true);
    await live.post(`/v1/agents/${liveAgent}/terminate`);
  });

  it('the check itself finds what it should: a gauge named _total and minutes', () => {
    const bad = ['# HELP x_active_total a gauge', '# TYPE x_active_total gauge', 'x_active_total 1', '# HELP y_minutes_total used', '# TYPE y_minutes_total counter', 'y_minutes_total 2', ''].join('\n');
    const check = promtoolCheck(bad);
    expect(check.output).toContain('x_active_total non-counter metrics should not have "_total" suffix');
    expect(check.output).toContain('y_minutes_total use base unit "seconds" instead of "minutes"');
  });
});
