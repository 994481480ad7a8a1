import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, runBerth, startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { launchChromium } from '../helpers/chromium.js';
import { startFakeOpenAI, type FakeModelServer } from '../helpers/fake-models.js';
import { startIdentityProvider, type TestIdentityProvider } from '../helpers/oidc.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * The dashboard in Debian's headless Chromium against a real `berth up` configured with a real
 * OpenID Connect provider (test/helpers/oidc.ts): signed in through the provider, every page
 * checked by axe-core and photographed at a laptop's and a phone's width (.test-results/browser/),
 * a key created in the page and used on /v1, the usage charts showing the seeded ledger's cents,
 * an agent's run in gVisor watched live on its page, and a viewer offered nothing they may not do.
 */
const ARTIFACTS = join(ROOT, '.test-results', 'browser', 'dashboard');
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const CENT = 1_000_000_000n; // the ledger's amounts are nanocents
const ANSWER = 'The product is 42.';
const WIDTHS = [
  { name: 'laptop', width: 1280, height: 800 },
  { name: 'phone', width: 390, height: 844 },
] as const;

async function axeViolations(page: Page): Promise<{ id: string; impact: string; nodes: string[] }[]> {
  await page.addScriptTag({ content: AXE_SOURCE });
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(context: Document): Promise<{ violations: { id: string; impact: string; nodes: { target: unknown[] }[] }[] }> } }).axe;
    const result = await axe.run(document);
    return result.violations.map((violation) => ({ id: violation.id, impact: violation.impact, nodes: violation.nodes.map((node) => JSON.stringify(node.target)) }));
  });
}

/** Opens a page of the console and waits for its heading and for its data (no "Loading…" left). */
async function open(page: Page, hash: string, heading: string): Promise<void> {
  await page.evaluate((target) => (location.hash = target), hash);
  await page.waitForFunction((text) => document.getElementById('page-title')?.textContent === text, heading, { timeout: 20_000 });
  await page.waitForFunction(() => !document.querySelector('main [role=status]')?.textContent?.includes('Loading'), undefined, { timeout: 20_000 });
}

/** axe-core finds nothing, in the light and the dark theme; then a screenshot at each width. */
async function checkPage(page: Page, name: string): Promise<void> {
  for (const theme of ['light', 'dark'] as const) {
    await page.evaluate((value) => (document.documentElement.dataset.theme = value), theme);
    expect(await axeViolations(page), `${name} (${theme})`).toEqual([]);
  }
  await page.evaluate(() => (document.documentElement.dataset.theme = 'light'));
  for (const size of WIDTHS) {
    await page.setViewportSize({ width: size.width, height: size.height });
    // Charts redraw at the new width on the next frames.
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(resolve, 100)))));
    // Nothing wider than the screen but what scrolls inside its own region (tables).
    const overflow = await page.evaluate(() => {
      const width = document.documentElement.clientWidth;
      const wide = [...document.querySelectorAll('body *')]
        // What sticks out, but not inside a region that scrolls on its own (the navigation, tables).
        .filter((element) => {
          if (element.getBoundingClientRect().right <= width + 1) return false;
          for (let up = element.parentElement; up; up = up.parentElement) if (getComputedStyle(up).overflowX !== 'visible') return false;
          return true;
        })
        .map((element) => `${element.tagName.toLowerCase()}.${element.className} (${Math.round(element.getBoundingClientRect().right)} px)`);
      return { by: document.documentElement.scrollWidth - width, wide: wide.slice(0, 5) };
    });
    expect(overflow.by, `${name} at ${size.width} px scrolls sideways: ${overflow.wide.join(', ')}`).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(ARTIFACTS, `${name}-${size.width}x${size.height}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

/** The cells of a chart's data table, by row label and column, as the page shows them. */
async function chartTable(page: Page, id: string): Promise<Record<string, Record<string, string>>> {
  return page.evaluate((chartId) => {
    const table = document.querySelector(`#${chartId} table`)!;
    const columns = [...table.querySelectorAll('thead th')].map((cell) => cell.textContent!).slice(1);
    return Object.fromEntries(
      [...table.querySelectorAll('tbody tr')].map((row) => [
        row.querySelector('th')!.textContent!,
        Object.fromEntries([...row.querySelectorAll('td')].map((cell, index) => [columns[index]!, cell.textContent!])),
      ]),
    );
  }, id);
}

describe('the dashboard in Chromium', () => {
  let model: FakeModelServer;
  let receiver: WebhookReceiver;
  let idp: TestIdentityProvider;
  let berth: BerthProcess;
  let pool: pg.Pool;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let organizationId: string;
  let databaseUrl: string;
  const dataDir = tempDir('berth-dashboard-');
  /** Script errors of the page: none are expected, on any page. */
  const pageErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    model = await startFakeOpenAI((_body: unknown, turn: number) =>
      turn === 0
        ? { text: 'Computing it.', toolCalls: [{ name: 'exec', input: { language: 'python', code: 'print(6 * 7)' } }], pauseMs: 100 }
        : { text: ANSWER, pauseMs: 300 },
    );
    idp = await startIdentityProvider();
    receiver = await startWebhookReceiver();
    databaseUrl = await createTestDatabase();
    pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    berth = await startBerth({
      dataDir,
      env: {
        DATABASE_URL: databaseUrl,
        BERTH_OIDC_ISSUER: idp.issuer,
        BERTH_OIDC_CLIENT_ID: idp.clientId,
        BERTH_OIDC_CLIENT_SECRET: idp.clientSecret,
        BERTH_OIDC_ALLOW_HTTP: 'true',
        BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }),
        BERTH_MODEL_PRICES: JSON.stringify({ 'openai/gpt-4o-mini': { input: '1.00', output: '1.00' } }),
        // The webhook receiver is on loopback, over http.
        BERTH_WEBHOOK_ALLOW_HTTP: 'true',
        BERTH_WEBHOOK_ALLOW_PRIVATE: 'true',
      },
    });
    idp.redirectUris.push(`${berth.baseUrl}/api/auth/callback`);
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 800 }, bypassCSP: true /* axe-core is injected as an inline script */ });
    page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    // Rollbacks and removals ask first.
    page.on('dialog', (dialog) => void dialog.accept());
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    expect(await berth?.stop()).toBe(0);
    removeDataDir(dataDir);
    await pool?.end();
    await idp?.close();
    await receiver?.close();
    await model?.close();
  });

  it('serves the console at / with its hashed assets, no other origin in the page', async () => {
    const index = await fetch(`${berth.baseUrl}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(index.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await index.text();
    const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((match) => match[1]!);
    expect(assets.length).toBe(2);
    expect(html).not.toMatch(/https?:\/\//);
    for (const asset of assets) {
      const response = await fetch(`${berth.baseUrl}${asset}`, { headers: { 'accept-encoding': 'gzip' } });
      expect(response.status, asset).toBe(200);
      expect(response.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(response.headers.get('content-encoding')).toBe('gzip');
    }
    const missing = await fetch(`${berth.baseUrl}/assets/nothing-here.js`);
    expect(missing.status).toBe(404);
    expect((await missing.json()).error.code).toBe('not_found');
  });

  it('signs the owner in with the one-time link of `berth admin login` and lands on the overview', async () => {
    const requests: string[] = [];
    page.on('request', (request) => requests.push(request.url()));
    await page.goto(`${berth.baseUrl}/#/overview`);
    await page.waitForSelector('text=Sign in to Berth');
    await checkPage(page, 'sign-in');
    const printed = await runBerth(['admin', 'login'], { DATABASE_URL: databaseUrl, BERTH_PUBLIC_URL: berth.baseUrl });
    expect(printed.code, printed.stderr).toBe(0);
    const token = /sign-in link: \S+\?token=([A-Za-z0-9_-]+)/.exec(printed.stdout)?.[1];
    expect(token, printed.stdout).toBeTruthy();
    await page.goto(`${berth.baseUrl}/api/auth/link?token=${token}&returnTo=${encodeURIComponent('/#/overview')}`);
    await page.waitForFunction(() => document.getElementById('page-title')?.textContent === 'Overview', undefined, { timeout: 30_000 });
    expect(new URL(page.url()).hash).toBe('#/overview');
    // Every request of the console went to Berth: no CDN, no other origin.
    expect([...new Set(requests.map((url) => new URL(url).origin))]).toEqual([berth.baseUrl]);
    const me = await page.evaluate(() => fetch('/api/me').then((response) => response.json()));
    expect(me.organization.role).toBe('owner');
    organizationId = me.organization.id;
  }, 60_000);

  it('shows the seeded usage: the overview and the charts carry the ledger’s cents', async () => {
    const now = Date.now();
    const day = (back: number) => new Date(now - back * 86_400_000).toISOString();
    const charges = [
      // alice: sandbox minutes and two models, billed by Berth; bob: a model on his own key (provider-direct).
      { user: 'alice', kind: 'compute', model: null, nanocents: 1234n * CENT, mode: 'managed', at: day(1) },
      { user: 'alice', kind: 'model', model: 'openai/gpt-4o-mini', nanocents: 567n * CENT, mode: 'managed', at: day(1) },
      { user: 'alice', kind: 'model', model: 'anthropic/claude-sonnet-4', nanocents: 890n * CENT, mode: 'managed', at: day(0) },
      { user: 'bob', kind: 'model', model: 'openai/gpt-4o-mini', nanocents: 45n * CENT, mode: 'byoi_models', at: day(0) },
    ];
    let serial = 0;
    for (const charge of charges) {
      await pool.query(
        `INSERT INTO usage_ledger (organization_id, session_id, user_id, environment, kind, provider, model,
           input_tokens, output_tokens, quantity, amount_nanocents, currency, billing_mode, occurred_at, dedupe_key)
         VALUES ($1, $2, $3, 'production', $4, $5, $6, 10, 5, '1', $7, 'usd', $8, $9, $10)`,
        [organizationId, `ses_${charge.user}`, charge.user, charge.kind, charge.model?.split('/')[0] ?? 'local', charge.model, charge.nanocents.toString(), charge.mode, charge.at, `dashboard-test/${serial++}`],
      );
    }

    await open(page, '#/overview', 'Overview');
    await page.reload();
    await open(page, '#/overview', 'Overview');
    const stat = (id: string) => page.evaluate((statId) => document.querySelector(`#${statId} .stat-value`)!.textContent, id);
    // This month: the seeded days may fall in last month on the 1st; the charts' 30 days hold them all.
    const thisMonth = charges.filter((charge) => new Date(charge.at).getUTCMonth() === new Date(now).getUTCMonth());
    const monthCents = thisMonth.reduce((sum, charge) => sum + Number(charge.nanocents / CENT), 0);
    expect(await stat('stat-spend')).toBe(`$${(monthCents / 100).toFixed(2)}`);
    expect(await stat('stat-running')).toBe('0');
    // Top users this month, highest first, from the same ledger.
    const byUser = new Map<string, number>();
    for (const charge of thisMonth) byUser.set(charge.user, (byUser.get(charge.user) ?? 0) + Number(charge.nanocents / CENT));
    const topUsers = [...byUser].sort((a, b) => b[1] - a[1]).map(([user, cents]) => [user, `$${(cents / 100).toFixed(2)}`]);
    expect(await page.$$eval('#top-users-title ~ .table-wrap tbody tr', (rows) => rows.map((row) => [...row.querySelectorAll('td')].map((cell) => cell.textContent)))).toEqual(topUsers);
    await checkPage(page, 'overview');

    await open(page, '#/usage', 'Usage');
    await page.waitForSelector('#chart-models canvas');
    expect(await chartTable(page, 'chart-models')).toEqual({
      'anthropic/claude-sonnet-4': { Cost: '$8.90' },
      'openai/gpt-4o-mini': { Cost: '$6.12' },
    });
    expect(await chartTable(page, 'chart-split')).toEqual({
      Compute: { 'Billed by Berth': '$12.34', 'Provider-direct': '$0.00' },
      Models: { 'Billed by Berth': '$14.57', 'Provider-direct': '$0.45' },
      Storage: { 'Billed by Berth': '$0.00', 'Provider-direct': '$0.00' },
    });
    // Each day stacked by kind, with its total.
    const daily = await chartTable(page, 'chart-daily');
    expect(daily[day(1).slice(5, 10)]).toEqual({ Compute: '$12.34', Models: '$5.67', Storage: '$0.00', Total: '$18.01' });
    expect(daily[day(0).slice(5, 10)]).toEqual({ Compute: '$0.00', Models: '$9.35', Storage: '$0.00', Total: '$9.35' });
    expect(Object.keys(daily)).toHaveLength(30);
    expect(await chartTable(page, 'chart-users')).toEqual({ alice: { Cost: '$26.91' }, bob: { Cost: '$0.45' } });
    // Chart.js drew on the canvas: pixels that are not the background.
    const drawn = await page.evaluate(() => {
      const canvas = document.querySelector<HTMLCanvasElement>('#chart-models canvas')!;
      const pixels = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
      let painted = 0;
      for (let index = 3; index < pixels.length; index += 4) if (pixels[index]! > 0) painted++;
      return painted;
    });
    expect(drawn).toBeGreaterThan(1000);
    await checkPage(page, 'usage');
  }, 60_000);

  let key: string;

  it('creates an API key in the page, shown once, that works on /v1 at once', async () => {
    await open(page, '#/keys', 'API keys');
    await page.getByLabel('Label').fill('from-the-dashboard');
    await page.getByLabel('Mode').selectOption('live');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.waitForSelector('#new-key');
    key = (await page.textContent('#new-key'))!;
    expect(key).toMatch(/^svc_live_/);
    await page.waitForSelector('text=from-the-dashboard');
    await checkPage(page, 'keys');
    const sessions = await fetch(`${berth.baseUrl}/v1/sessions`, { headers: { authorization: `Bearer ${key}` } });
    expect(sessions.status).toBe(200);
    // Shown once: a reload lists it by prefix only.
    await page.reload();
    await open(page, '#/keys', 'API keys');
    expect(await page.locator('#new-key').count()).toBe(0);
    expect(await page.textContent('main')).not.toContain(key);
    expect(await page.textContent('main')).toContain(key.slice(0, 12));
  });

  let agentId: string;

  it("watches an agent's run live on its page and runs code from its exec console", async () => {
    const api = berth.api(key);
    const session = await api.post('/v1/sessions/by-user/carol', {});
    expect(session.status, JSON.stringify(session.body)).toBe(201);
    const agent = await api.post(`/v1/sessions/${session.body.id}/agents`, { model: 'openai/gpt-4o-mini', tools: ['exec'], timeout: '10m' });
    expect(agent.status, JSON.stringify(agent.body)).toBe(201);
    const deadline = Date.now() + 90_000;
    while ((await api.get(`/v1/agents/${agent.body.id}`)).body.status !== 'idle') {
      if (Date.now() > deadline) throw new Error('the agent did not become idle');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }

    await open(page, '#/sessions', 'Sessions and agents');
    await checkPage(page, 'sessions');
    await page.getByRole('link', { name: session.body.id }).click();
    await page.waitForFunction(() => document.getElementById('page-title')?.textContent === 'Session of carol');
    await page.getByRole('link', { name: agent.body.id }).click();
    await page.waitForFunction(() => document.getElementById('page-title')?.textContent === 'Agent');
    await page.waitForSelector('text=(connected)');
    // The page watches the stream; each event as it arrives, in order.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { seen: string[] }).seen = seen;
      new MutationObserver(() => {
        const last = document.querySelector('#agent-stream li:last-child');
        if (last) seen.push((last as HTMLElement).dataset.event!);
      }).observe(document.querySelector('main')!, { subtree: true, childList: true });
    });
    const run = await api.post(`/v1/agents/${agent.body.id}/run`, { task: 'What is 6 times 7?' });
    expect(run.status, JSON.stringify(run.body)).toBe(202);
    await page.waitForSelector(`#agent-stream li[data-event=output]:has-text("${ANSWER}")`, { timeout: 90_000 });
    const events = await page.$$eval('#agent-stream li', (items) => items.map((item) => (item as HTMLElement).dataset.event));
    expect(events).toContain('tool_call');
    expect(events.indexOf('tool_result')).toBeGreaterThan(events.indexOf('tool_call'));
    expect(events.at(-1)).toBe('output');
    const results = await page.$$eval('#agent-stream li[data-event=tool_result]', (items) => items.map((item) => item.textContent));
    expect(results.length, JSON.stringify(results)).toBe(1);
    expect(results[0]).toMatch(/^tool_result exec → exit 0: .*\b42\n$/s);
    expect(await page.$$eval('#agent-stream li[data-event=thinking]', (items) => items.map((item) => item.textContent))).toContain('thinking Computing it.');
    const seen = await page.evaluate(() => (window as unknown as { seen: string[] }).seen);
    expect(seen.length, 'events arrived one by one').toBeGreaterThanOrEqual(3);

    await page.getByLabel('Language').selectOption('python');
    await page.getByLabel('Code').fill('print(sum(range(10)))');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.waitForSelector('#exec-result');
    expect(await page.textContent('#exec-result')).toContain('Exit code 0');
    expect(await page.textContent('#exec-result pre')).toBe('45\n');
    await checkPage(page, 'agent');
    agentId = agent.body.id;
  }, 180_000);

  it("shows the agent's snapshot with its state and size, on the snapshots page and the agent's, and resumes it as a new agent", async () => {
    const api = berth.api(key);
    const paused = await api.post(`/v1/agents/${agentId}/pause`);
    expect(paused.status, JSON.stringify(paused.body)).toBe(200);
    const deadline = Date.now() + 120_000;
    let snapshot: { id: string; state: string; sizeBytes: number; type: string; level: string; provider: string } | undefined;
    while (snapshot?.state !== 'ready') {
      if (Date.now() > deadline) throw new Error(`the snapshot was not archived: ${JSON.stringify(snapshot)}`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      snapshot = (await api.get(`/v1/snapshots?agentId=${agentId}`)).body.data[0];
    }

    await open(page, '#/snapshots', 'Snapshots');
    const row = (scope: string) =>
      page.$eval(`${scope} tr[data-snapshot="${snapshot!.id}"]`, (tr) => ({
        cells: [...tr.querySelectorAll('td')].map((cell) => cell.textContent),
        bytes: Number(tr.querySelector<HTMLElement>('[data-bytes]')!.dataset.bytes),
      }));
    const listed = await row('main');
    expect(listed.cells.slice(0, 3)).toEqual([snapshot.id, agentId, 'ready']);
    expect(listed.bytes).toBe(snapshot.sizeBytes);
    // The size as shown: decimal units, to a tenth.
    const [amount, unit] = listed.cells[3]!.split(' ');
    const scale = { B: 1, kB: 1e3, MB: 1e6, GB: 1e9 }[unit!]!;
    expect(Math.abs(Number(amount) * scale - snapshot.sizeBytes)).toBeLessThanOrEqual(scale / 10);
    expect(listed.cells[4]).toBe(`${snapshot.type}, ${snapshot.level} on ${snapshot.provider}`);
    await checkPage(page, 'snapshots');
    await page.getByLabel('State').selectOption('failed');
    await page.waitForSelector('text=No snapshots');
    await page.getByLabel('State').selectOption('');
    await page.waitForSelector(`tr[data-snapshot="${snapshot.id}"]`);

    await open(page, `#/agents/${agentId}`, 'Agent');
    await page.waitForSelector(`#snapshots-title ~ .table-wrap tr[data-snapshot="${snapshot.id}"]`);
    expect((await row('#snapshots-title ~ .table-wrap')).cells.slice(0, 3)).toEqual([snapshot.id, agentId, 'ready']);

    await open(page, '#/snapshots', 'Snapshots');
    await page.getByRole('button', { name: `Resume ${snapshot.id} as a new agent` }).click();
    await page.waitForSelector('#snapshot-resumed');
    const resumedId = await page.textContent('#snapshot-resumed a');
    expect(resumedId).toMatch(/^agt_/);
    expect(resumedId).not.toBe(agentId);
    expect((await page.textContent('#snapshot-resumed'))!).toContain('(native)');
    const resumed = await api.get(`/v1/agents/${resumedId}`);
    expect(resumed.status).toBe(200);
    await api.post(`/v1/agents/${resumedId}/terminate`);
  }, 180_000);

  it('lists secrets by name, schedules with their next run, webhooks, the team and the audit log of what the page did', async () => {
    await open(page, '#/secrets', 'Secrets');
    await checkPage(page, 'secrets-empty');
    await page.getByLabel('Name').fill('WAREHOUSE_TOKEN');
    await page.getByLabel('Value').fill('a-value-never-shown');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForSelector('text=WAREHOUSE_TOKEN');
    expect(await page.content()).not.toContain('a-value-never-shown');
    await checkPage(page, 'secrets');

    await open(page, '#/schedules', 'Schedules');
    expect(await page.textContent('main')).toContain('No schedules yet');
    const live = berth.api(key);
    const definition = await live.post('/v1/agent-definitions', { name: 'nightly-report', model: 'openai/gpt-4o-mini', systemPrompt: 'You write reports.' });
    expect(definition.status, JSON.stringify(definition.body)).toBe(201);
    const schedule = await live.post('/v1/schedules', { name: 'nightly report', agent: 'nightly-report', userId: 'dana', cron: '30 2 * * *', timezone: 'Europe/Berlin', input: 'yesterday' });
    expect(schedule.status, JSON.stringify(schedule.body)).toBe(201);
    await page.reload();
    await open(page, '#/schedules', 'Schedules');
    const row = await page.$$eval('main tbody tr td', (cells) => cells.map((cell) => cell.textContent));
    expect(row).toEqual(['nightly report', 'nightly-report', 'dana', '30 2 * * * Europe/Berlin', `${schedule.body.nextRunAt.replace('T', ' ').slice(0, 16)} UTC`, '—']);
    await checkPage(page, 'schedules');
    await page.getByRole('link', { name: 'nightly report' }).click();
    await page.waitForFunction(() => document.getElementById('page-title')?.textContent === 'Schedule history');
    await page.waitForSelector('text=Not run yet');
    await checkPage(page, 'schedule-history');

    // The definition the schedule runs, changed twice over the API: its versions, compared and rolled back in the page.
    const put = (path: string, body: unknown) =>
      fetch(`${berth.baseUrl}${path}`, { method: 'PUT', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await put(`/v1/agent-definitions/${definition.body.id}`, { systemPrompt: 'You write short reports.', config: { temperature: 0.2 }, changelog: 'shorter' })).status).toBe(200);
    await open(page, '#/definitions', 'Agent definitions');
    expect(await page.$$eval('main tbody tr td', (cells) => cells.map((cell) => cell.textContent))).toEqual(['nightly-report', '2', 'openai/gpt-4o-mini', 'none', expect.stringMatching(/ UTC$/)]);
    await checkPage(page, 'definitions');
    await page.getByRole('link', { name: 'nightly-report' }).click();
    await page.waitForFunction(() => document.getElementById('page-title')?.textContent === 'Agent definition');
    await page.waitForSelector('#definition-diff');
    expect(await page.textContent('#definition-version')).toBe('2');
    expect(await page.textContent('#diff-summary')).toBe('2 fields changed.');
    const changed = await page.$$eval('#definition-diff tr[data-changed]', (rows) => rows.map((row) => [row.querySelector('th')!.firstChild!.textContent, ...[...row.querySelectorAll('td')].map((cell) => cell.textContent)]));
    expect(changed).toEqual([
      ['System prompt', 'You write reports.', 'You write short reports.'],
      ['Model settings', 'defaults', 'temperature 0.2'],
    ]);
    expect(await page.$$eval('#definition-diff tbody tr', (rows) => rows.length)).toBe(8);
    await checkPage(page, 'definition');
    await page.getByRole('button', { name: 'Roll back to version 1' }).click();
    await page.waitForSelector('text=Version 1 is current now.');
    await page.waitForFunction(() => document.getElementById('definition-version')?.textContent === '1');
    const rolledBack = await live.get(`/v1/agent-definitions/${definition.body.id}`);
    expect(rolledBack.body).toMatchObject({ version: 1, systemPrompt: 'You write reports.', config: {} });
    expect(await page.getByRole('button', { name: 'Roll back to version 2' }).count()).toBe(1);

    // A trigger of the definition: its fire URL and its secret by its first characters.
    const trigger = await live.post('/v1/triggers', { agent: 'nightly-report', userId: 'frank', name: 'new-ticket', type: 'webhook' });
    expect(trigger.status, JSON.stringify(trigger.body)).toBe(201);
    await open(page, '#/triggers', 'Triggers');
    const [listedTrigger] = (await live.get('/v1/triggers')).body.data;
    expect(await page.$$eval(`tr[data-trigger="${trigger.body.id}"] td`, (cells) => cells.map((cell) => cell.textContent))).toEqual([
      'new-ticket',
      definition.body.id,
      'frank',
      trigger.body.url,
      listedTrigger.secret,
      'never',
      `${trigger.body.createdAt.replace('T', ' ').slice(0, 16)} UTC`,
    ]);
    expect(listedTrigger.secret).not.toBe(trigger.body.secret);
    await checkPage(page, 'triggers');

    await open(page, '#/webhooks', 'Webhooks');
    expect(await page.textContent('main')).toContain('No webhooks yet');
    await checkPage(page, 'webhooks');

    await open(page, '#/providers', 'BYOI providers');
    expect(await page.textContent('main')).toContain("Berth's own providers are in use");
    await checkPage(page, 'providers-empty');
    // Configured from the page: created, changed, removed, each as the API then lists it.
    const providersListed = async () => (await live.get('/v1/providers')).body.data;
    const GPU_SETTINGS = { endpoint: 'https://gpu.acme.example.com/provider/v1', tier: 'gold' };
    await page.getByLabel('Provider', { exact: true }).fill('acme-gpu');
    await page.getByLabel('Credential secret').selectOption('WAREHOUSE_TOKEN');
    await page.getByLabel('Settings (JSON)').fill(JSON.stringify(GPU_SETTINGS));
    await page.getByRole('button', { name: 'Save provider' }).click();
    await page.waitForSelector('tr[data-provider="acme-gpu"]');
    expect(await providersListed()).toEqual([expect.objectContaining({ provider: 'acme-gpu', enabled: true, credentialRef: 'WAREHOUSE_TOKEN', config: GPU_SETTINGS })]);
    const cells = await page.$$eval('tr[data-provider="acme-gpu"] td', (row) => row.slice(0, 4).map((cell) => cell.textContent ?? ''));
    expect(cells.slice(0, 3)).toEqual(['acme-gpu', 'yes', 'WAREHOUSE_TOKEN']);
    // The settings as stored (PostgreSQL's jsonb orders their keys its own way).
    expect(JSON.parse(cells[3]!)).toEqual(GPU_SETTINGS);
    await checkPage(page, 'providers');
    await page.getByRole('button', { name: 'Change acme-gpu' }).click();
    await page.getByLabel('Enabled').uncheck();
    await page.getByRole('button', { name: 'Save provider' }).click();
    await page.waitForFunction(() => document.querySelector('tr[data-provider="acme-gpu"] td:nth-child(2)')?.textContent === 'no');
    expect(await providersListed()).toEqual([expect.objectContaining({ provider: 'acme-gpu', enabled: false, credentialRef: 'WAREHOUSE_TOKEN', config: GPU_SETTINGS })]);
    await page.getByRole('button', { name: 'Remove acme-gpu' }).click();
    await page.waitForSelector('text=acme-gpu is managed by Berth again.');
    expect(await providersListed()).toEqual([]);
    // Settings that are not JSON are refused in the page; nothing is written.
    await page.getByLabel('Provider', { exact: true }).fill('acme-gpu');
    await page.getByLabel('Credential secret').selectOption('WAREHOUSE_TOKEN');
    await page.getByLabel('Settings (JSON)').fill('{tier');
    await page.getByRole('button', { name: 'Save provider' }).click();
    await page.waitForSelector('[role=alert]:has-text("Settings: not JSON")');
    expect(await providersListed()).toEqual([]);

    await open(page, '#/team', 'Team and roles');
    await checkPage(page, 'team');

    await open(page, '#/audit', 'Audit log');
    const actions = await page.$$eval('main tbody tr td:nth-child(3)', (cells) => cells.map((cell) => cell.textContent));
    expect(actions).toEqual(expect.arrayContaining(['api_key.created', 'secrets.set', 'agent_definition.rolled_back', 'provider.configured', 'provider.removed']));
    await checkPage(page, 'audit');
  });

  it("follows a workflow run's steps and a fleet's counts to their end, as the API has them", async () => {
    const live = berth.api(key);
    const calculator = await live.post('/v1/agent-definitions', { name: 'calculator', model: 'openai/gpt-4o-mini', tools: ['exec'], systemPrompt: 'You compute.' });
    expect(calculator.status, JSON.stringify(calculator.body)).toBe(201);
    const workflow = await live.post('/v1/workflows', {
      name: 'compute-and-report',
      steps: [
        { name: 'compute', agent: 'calculator', input: 'What is 6 times 7?' },
        { name: 'report', agent: 'calculator', input: 'Report this: {{steps.compute.output}}', dependsOn: ['compute'] },
      ],
    });
    expect(workflow.status, JSON.stringify(workflow.body)).toBe(201);
    const run = await live.post(`/v1/workflows/${workflow.body.id}/runs`, { userId: 'erin' });
    expect(run.status, JSON.stringify(run.body)).toBe(201);
    const session = await live.post('/v1/sessions', { userId: 'gina' });
    const fleet = await live.post('/v1/fleets', { agent: 'calculator', sessionId: session.body.id, name: 'products', prompt: 'Compute {{item}}.', items: ['6 times 7', '7 times 6'], concurrency: 2 });
    expect(fleet.status, JSON.stringify(fleet.body)).toBe(201);

    // While they run, the pages show them running and refresh on their own.
    await open(page, '#/workflows', 'Workflows');
    expect(await page.$$eval('main tbody tr td', (cells) => cells.map((cell) => cell.textContent))).toEqual(['compute-and-report', 'compute → report', '1', expect.stringMatching(/ UTC$/)]);
    await checkPage(page, 'workflows');
    await open(page, `#/workflow-runs/${run.body.id}`, 'Workflow run');

    const deadline = Date.now() + 240_000;
    const ended = async <T extends { status: string }>(path: string, done: (body: T) => boolean): Promise<T> => {
      for (;;) {
        const body = (await live.get(path)).body as T;
        if (done(body)) return body;
        if (Date.now() > deadline) throw new Error(`${path} did not end: ${JSON.stringify(body)}`);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    };
    const finishedRun = await ended<{ status: string; steps: { name: string; status: string; attempts: number; output: string }[] }>(
      `/v1/workflow-runs/${run.body.id}`,
      (body) => body.status !== 'running',
    );
    expect(finishedRun.status, JSON.stringify(finishedRun)).toBe('completed');
    // The run's page, left open, caught up by itself.
    await page.waitForFunction(() => document.getElementById('run-status')?.textContent === 'completed', undefined, { timeout: 10_000 });
    const steps = await page.$$eval('tr[data-step]', (rows) => rows.map((row) => [...row.querySelectorAll('td')].map((cell) => cell.textContent)));
    expect(steps.map((cells) => [cells[0], cells[1], cells[2], cells[5]])).toEqual(finishedRun.steps.map((step) => [step.name, step.status, String(step.attempts), step.output]));
    expect(await page.textContent('main .facts .progress-text')).toBe('2 of 2 steps');
    await checkPage(page, 'workflow-run');
    await open(page, `#/workflows/${workflow.body.id}`, 'Workflow');
    expect(await page.$$eval(`tr[data-run="${run.body.id}"] td`, (cells) => cells.slice(0, 4).map((cell) => cell.textContent))).toEqual([run.body.id, 'erin', 'completed', '2 of 2 steps']);
    await checkPage(page, 'workflow');

    const finishedFleet = await ended<{ status: string; completed: number; failed: number; cancelled: number; running: number; pending: number; total: number }>(
      `/v1/fleets/${fleet.body.id}`,
      (body) => body.status !== 'running',
    );
    expect(finishedFleet).toMatchObject({ status: 'completed', total: 2, completed: 2 });
    const counts = `${finishedFleet.completed} completed, ${finishedFleet.failed} failed, ${finishedFleet.cancelled} cancelled, ${finishedFleet.running} running, ${finishedFleet.pending} pending`;
    await open(page, '#/fleets', 'Fleets');
    await page.waitForFunction((id) => document.querySelector(`tr[data-fleet="${id}"] td:nth-child(3)`)?.textContent === 'completed', fleet.body.id, { timeout: 10_000 });
    expect(await page.$$eval(`tr[data-fleet="${fleet.body.id}"] td`, (cells) => cells.slice(0, 5).map((cell) => cell.textContent))).toEqual(['products', 'calculator', 'completed', '2 of 2 items', counts]);
    await checkPage(page, 'fleets');
    await page.getByRole('link', { name: 'products' }).click();
    await page.waitForFunction(() => document.getElementById('page-title')?.textContent === 'Fleet');
    await page.waitForSelector('#fleet-counts');
    expect(await page.textContent('#fleet-counts')).toBe(counts);
    const items = (await live.get(`/v1/fleets/${fleet.body.id}/items`)).body.data as { index: number; status: string; output: string }[];
    expect(await page.$$eval('tr[data-item]', (rows) => rows.map((row) => [...row.querySelectorAll('td')].map((cell) => cell.textContent)))).toEqual(
      items.map((item) => [String(item.index), ['6 times 7', '7 times 6'][item.index], item.status, expect.stringMatching(/^\$/), expect.stringMatching(/ UTC$/), item.output]),
    );
    await checkPage(page, 'fleet');
  }, 300_000);

  it("previews a channel's chat widget live in the page, answered by the channel's agent", async () => {
    const live = berth.api(key);
    const channel = await live.post('/v1/channels', {
      type: 'chat_embed',
      agent: 'calculator',
      name: 'Reports desk',
      theme: { title: 'Ask the reports desk', greeting: 'Hello from the reports desk.', primaryColor: '#0b5fff' },
    });
    expect(channel.status, JSON.stringify(channel.body)).toBe(201);
    await open(page, '#/channels', 'Channels');
    expect(await page.$$eval('main tbody tr td', (cells) => cells.map((cell) => cell.textContent))).toEqual(['Reports desk', 'chat_embed', channel.body.agent, 'any website', expect.stringMatching(/ UTC$/)]);
    await checkPage(page, 'channels');
    await page.getByRole('link', { name: 'Reports desk' }).click();
    await page.waitForFunction(() => document.getElementById('page-title')?.textContent === 'Channel');
    // The widget's own element, moved into the preview once its script read the channel's theme.
    // (attached: the element itself has no box; the widget inside it is fixed-position.)
    await page.waitForSelector('#widget-preview #berth-chat', { state: 'attached', timeout: 20_000 });
    expect(await page.textContent('#channel-script-tag')).toBe(channel.body.scriptTag);
    expect(await page.textContent('#widget-preview #berth-chat-title')).toBe('Ask the reports desk');
    await page.click('#widget-preview button.launcher');
    await page.waitForSelector('#widget-preview .greeting:has-text("Hello from the reports desk.")');
    await page.fill('#widget-preview #berth-chat-input', 'What is 6 times 7?');
    await page.click('#widget-preview button.send');
    await page.waitForSelector(`#widget-preview [role=log] :text("${ANSWER}")`, { timeout: 120_000 });
    await checkPage(page, 'channel');
    // Leaving the page takes the widget away.
    await open(page, '#/channels', 'Channels');
    expect(await page.locator('#berth-chat').count()).toBe(0);
  }, 180_000);

  it('resends a delivery from the delivery log: the same event again, as its next attempt', async () => {
    const live = berth.api(key);
    const hook = await live.post('/v1/webhooks', { url: `${receiver.url}/dashboard`, events: ['agent.failed'] });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    await open(page, `#/webhooks/${hook.body.id}`, 'Webhook deliveries');
    await page.getByRole('button', { name: 'Send a test event' }).click();
    await page.waitForSelector('text=Delivered (HTTP 200).');
    const [delivery] = (await live.get(`/v1/webhooks/${hook.body.id}/deliveries`)).body.data;
    await page.waitForSelector(`tr[data-delivery="${delivery.id}"]`);
    const before = receiver.received.length;
    await page.getByRole('button', { name: `Resend agent.completed delivery ${delivery.id}` }).click();
    await page.waitForSelector('text=Resent agent.completed (attempt 2): delivered (HTTP 200).');
    await page.waitForFunction((id) => document.querySelector(`tr[data-delivery="${id}"] td:nth-child(3)`)?.textContent === '2', delivery.id);
    expect(receiver.received.length).toBe(before + 1);
    const first = receiver.received.find((received) => received.headers['x-svc-delivery'] === delivery.id)!;
    expect(receiver.received.at(-1)!.headers['x-svc-delivery']).toBe(delivery.id);
    expect(receiver.received.at(-1)!.body).toBe(first.body);
    const [after] = (await live.get(`/v1/webhooks/${hook.body.id}/deliveries`)).body.data;
    expect(after).toMatchObject({ id: delivery.id, state: 'succeeded', attempts: 2 });
    await checkPage(page, 'webhook-deliveries');
  }, 60_000);

  it('offers a viewer nothing they may not do, and the server refuses it anyway', async () => {
    const viewerContext = await browser.newContext({ viewport: { width: 1280, height: 800 }, bypassCSP: true /* axe-core is injected as an inline script */ });
    const viewer = await viewerContext.newPage();
    viewer.on('pageerror', (error) => pageErrors.push(error.message));
    // Through the OpenID Connect provider, with the keyboard: the sign-in link is the page's first control.
    idp.nextLogin = 'victor';
    await viewer.goto(`${berth.baseUrl}/`);
    await viewer.waitForSelector('text=Sign in to Berth');
    await viewer.keyboard.press('Tab');
    expect(await viewer.evaluate(() => document.activeElement?.textContent)).toBe('Sign in');
    await viewer.keyboard.press('Enter');
    await viewer.waitForSelector('text=No organization yet', { timeout: 30_000 });
    const authorize = idp.authorizationRequests.at(-1)!;
    expect(authorize.get('code_challenge_method')).toBe('S256');
    expect(authorize.get('redirect_uri')).toBe(`${berth.baseUrl}/api/auth/callback`);
    await checkPage(viewer, 'no-organization');
    const victor = await viewer.evaluate(() => fetch('/api/me').then((response) => response.json()));

    // The owner invites the viewer's user id from the team page; the viewer accepts.
    await open(page, '#/team', 'Team and roles');
    await page.getByLabel('Their user id').fill(victor.user.id);
    await page.getByLabel('Role').selectOption('viewer');
    await page.getByRole('button', { name: 'Invite' }).click();
    await page.waitForSelector(`text=${victor.user.id}`);
    const accepted = await viewer.evaluate(async (csrf) => {
      const invites = await fetch('/api/invites').then((response) => response.json());
      const response = await fetch(`/api/invites/${invites.data[0].id}/accept`, { method: 'POST', headers: { 'x-csrf-token': csrf } });
      return response.status;
    }, victor.csrfToken);
    expect(accepted).toBe(200);

    await viewer.reload();
    await viewer.waitForFunction(() => document.getElementById('page-title')?.textContent === 'Overview');
    const nav = await viewer.$$eval('nav a', (links) => links.map((link) => link.textContent));
    expect(nav).not.toContain('Audit log');
    // Agent definitions are for those who run agents; the rest they see, without the buttons.
    expect(nav).not.toContain('Agent definitions');
    expect(nav).toEqual(expect.arrayContaining(['Snapshots', 'Workflows', 'Fleets', 'Triggers', 'Channels', 'BYOI providers']));
    await open(viewer, '#/snapshots', 'Snapshots');
    expect(await viewer.locator('tr[data-snapshot]').count()).toBeGreaterThan(0);
    expect(await viewer.getByRole('button', { name: /^Resume/ }).count()).toBe(0);
    await open(viewer, '#/providers', 'BYOI providers');
    expect(await viewer.getByRole('button', { name: 'Save provider' }).count()).toBe(0);
    const hooks = (await berth.api(key).get('/v1/webhooks')).body.data as { id: string }[];
    await open(viewer, `#/webhooks/${hooks[0]!.id}`, 'Webhook deliveries');
    expect(await viewer.locator('tr[data-delivery]').count()).toBeGreaterThan(0);
    expect(await viewer.getByRole('button', { name: /^Resend/ }).count()).toBe(0);
    await open(viewer, '#/definitions', 'Agent definitions');
    expect(await viewer.textContent('main')).toContain('cannot see this page');
    await open(viewer, '#/keys', 'API keys');
    expect(await viewer.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    expect(await viewer.getByRole('button', { name: /^Revoke/ }).count()).toBe(0);
    expect(await viewer.textContent('main')).toContain('from-the-dashboard');
    await open(viewer, '#/secrets', 'Secrets');
    expect(await viewer.getByRole('button', { name: 'Save' }).count()).toBe(0);
    await checkPage(viewer, 'keys-as-viewer');
    const refused = await viewer.evaluate(async (csrf) => {
      const response = await fetch('/api/keys', { method: 'POST', headers: { 'x-csrf-token': csrf, 'content-type': 'application/json' }, body: JSON.stringify({ label: 'sneaky', mode: 'live' }) });
      return { status: response.status, body: await response.json() };
    }, victor.csrfToken);
    expect(refused.status).toBe(403);
    expect(refused.body.error.details).toMatchObject({ reason: 'role', permission: 'keys.manage', role: 'viewer' });
    await viewerContext.close();
    expect(pageErrors).toEqual([]);
  }, 60_000);
});
