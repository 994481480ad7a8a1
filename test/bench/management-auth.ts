/**
 * `make bench` (management plane): what the cookie authorization of `/api` costs a request,
 * beside floors measured in the same run against the same `berth up`:
 *
 *   GET /api/me      signed cookie checked, session row and user read
 *   GET /api/team    the same, plus the membership and role check, then the team listed
 *   floors           GET /healthz (no authorization, no query) and GET /v1/secrets (API key
 *                    looked up, one small list): what a request costs without the management guards
 *
 * The browser signs in with the one-time owner link `berth up` prints on first start.
 */
import { startBerth, tempDir } from '../helpers/berth.js';
import { Browser } from '../helpers/browser.js';
import { removeDataDir } from '../helpers/runsc.js';
import { percentile } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 200);

async function timed(run: () => Promise<{ status: number }>, expected: number): Promise<number> {
  const started = performance.now();
  const { status } = await run();
  const elapsed = performance.now() - started;
  if (status !== expected) throw new Error(`expected ${expected}, got ${status}`);
  return elapsed;
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-management-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  try {
    const link = /sign-in link: (\S+)/.exec(berth.stdout())?.[1];
    if (!link) throw new Error('berth up printed no sign-in link');
    const browser = new Browser(berth.baseUrl);
    if ((await browser.get(link)).status !== 200) throw new Error('the sign-in link did not sign in');
    const key = berth.api(berth.liveKey);
    const anonymous = berth.api(undefined);

    const measures: [name: string, run: () => Promise<{ status: number }>][] = [
      ['GET /healthz', () => anonymous.get('/healthz')],
      ['GET /v1/secrets', () => key.get('/v1/secrets')],
      ['GET /api/me', () => browser.get('/api/me')],
      ['GET /api/team', () => browser.get('/api/team')],
    ];
    const samples = new Map<string, number[]>(measures.map(([name]) => [name, []]));
    for (const [, run] of measures) await timed(run, 200);
    // Interleaved, so that the machine's noise falls on every measure alike.
    for (let i = 0; i < RUNS; i++) for (const [name, run] of measures) samples.get(name)!.push(await timed(run, 200));

    const p50 = (name: string) => percentile(samples.get(name)!, 50);
    const row = (name: string, floor: string) =>
      `${name.padEnd(16)}${p50(name).toFixed(2).padStart(9)}${percentile(samples.get(name)!, 95).toFixed(2).padStart(9)}   ${floor.padEnd(18)}${p50(floor).toFixed(2).padStart(9)}${`${(p50(name) / p50(floor)).toFixed(2)}x`.padStart(11)}`;
    console.log(`\nmanagement-plane authorization, ${RUNS} runs each (floors measured in the same run)`);
    console.log(`${'measure'.padEnd(16)}${'p50 ms'.padStart(9)}${'p95 ms'.padStart(9)}   ${'floor'.padEnd(18)}${'p50 ms'.padStart(9)}${'p50 ratio'.padStart(11)}`);
    console.log(row('GET /api/me', 'GET /healthz'));
    console.log(row('GET /api/team', 'GET /healthz'));
    console.log(row('GET /api/team', 'GET /v1/secrets'));
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
