/**
 * `make bench` (dashboard): the console's size on the wire and the time to first render of the
 * overview in Debian's headless Chromium, beside a floor measured in the same run against the
 * same `berth up`:
 *
 *   overview   a fresh browser context (empty cache) opens `/#/overview` signed in: the page, its
 *              script and stylesheet, then `/api/me`, the usage summary, the users by cost, the session defaults and
 *              the recent failures, until the spend is on the screen (`#stat-spend`)
 *   floor      the same, signed out: the same page, script and stylesheet, one `/api/me` (401), until
 *              the sign-in page's heading is on the screen. The difference is the overview's own
 *              reads and rendering.
 *
 * Times are the page's own (`performance.now()` since navigation start, when a MutationObserver
 * first sees the element). Signed in with the one-time owner link `berth up` prints on first start.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ROOT, startBerth, tempDir } from '../helpers/berth.js';
import { launchChromium } from '../helpers/chromium.js';
import { removeDataDir } from '../helpers/runsc.js';
import { percentile } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 30);

/** The built console as the server sends it: each file gzipped at level 9. */
function bundleSize(): { files: number; raw: number; gzipped: number } {
  const dist = join(ROOT, 'dashboard', 'dist', 'app');
  const files = ['index.html', ...readdirSync(join(dist, 'assets')).map((name) => join('assets', name))];
  let raw = 0;
  let gzipped = 0;
  for (const file of files) {
    const body = readFileSync(join(dist, file));
    raw += body.length;
    gzipped += gzipSync(body, { level: 9 }).length;
  }
  return { files: files.length, raw, gzipped };
}

/**
 * Records, in the page, when an element matching `selector` first appears (ms since navigation
 * start), as `window.firstRender`. A string: the page runs it as it is, before its own scripts.
 */
function watchFor(selector: string): string {
  return `(() => {
    const selector = ${JSON.stringify(selector)};
    const seen = () => document.querySelector(selector) && ((window.firstRender = performance.now()), true);
    new MutationObserver((_records, observer) => seen() && observer.disconnect()).observe(document, { subtree: true, childList: true });
  })();`;
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-dashboard-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  const browser = await launchChromium();
  try {
    const link = /sign-in link: \S+\?token=([A-Za-z0-9_-]+)/.exec(berth.stdout())?.[1];
    if (!link) throw new Error('berth up printed no sign-in link');
    const signingIn = await browser.newContext();
    const page = await signingIn.newPage();
    await page.goto(`${berth.baseUrl}/api/auth/link?token=${link}&returnTo=${encodeURIComponent('/#/overview')}`);
    await page.waitForSelector('#stat-spend');
    const cookies = await signingIn.cookies();
    await signingIn.close();

    async function firstRender(signedIn: boolean): Promise<number> {
      // A fresh context each time: nothing cached, as a first visit.
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      if (signedIn) await context.addCookies(cookies);
      const tab = await context.newPage();
      const selector = signedIn ? '#stat-spend' : 'main.sign-in h1';
      await tab.addInitScript({ content: watchFor(selector) });
      await tab.goto(`${berth.baseUrl}/#/overview`);
      await tab.waitForSelector(selector);
      const at = (await tab.evaluate('window.firstRender')) as number | undefined;
      await context.close();
      if (typeof at !== 'number') throw new Error('the first render was not seen');
      return at;
    }

    const overview: number[] = [];
    const floor: number[] = [];
    await firstRender(true);
    await firstRender(false);
    // Interleaved, so that the machine's noise falls on both alike.
    for (let i = 0; i < RUNS; i++) {
      overview.push(await firstRender(true));
      floor.push(await firstRender(false));
    }

    const size = bundleSize();
    const row = (name: string, samples: number[]) =>
      `${name.padEnd(34)}${percentile(samples, 50).toFixed(1).padStart(9)}${percentile(samples, 95).toFixed(1).padStart(9)}${`${(percentile(samples, 50) / percentile(floor, 50)).toFixed(2)}x`.padStart(11)}`;
    console.log(`\ndashboard: ${size.files} files, ${(size.raw / 1024).toFixed(1)} KiB, ${(size.gzipped / 1024).toFixed(1)} KiB gzipped (as sent with Accept-Encoding: gzip)`);
    console.log(`time to first render in headless Chromium, empty cache, ${RUNS} runs each (floor measured in the same run)`);
    console.log(`${'measure'.padEnd(34)}${'p50 ms'.padStart(9)}${'p95 ms'.padStart(9)}${'p50 ratio'.padStart(11)}`);
    console.log(row('overview, signed in (#stat-spend)', overview));
    console.log(row('floor: sign-in page, same bundle', floor));
  } finally {
    await browser.close();
    await berth.stop();
    removeDataDir(dataDir);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
