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
      },
    });
    idp.redirectUris.push(`${berth.baseUrl}/api/auth/callback`);
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 800 }, bypassCSP: true /* axe-core is injected as an inline script */ });
    page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    expect(await berth?.stop()).toBe(0);
    removeDataDir(dataDir);
    await pool?.end();
    await idp?.close();
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
    const daily = await chartTable(page, 'chart-daily');
    expect(daily[day(1).slice(5, 10)]).toEqual({ Cost: '$18.01' });
    expect(daily[day(0).slice(5, 10)]).toEqual({ Cost: '$9.35' });
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
    await api.post(`/v1/agents/${agent.body.id}/terminate`);
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

    await open(page, '#/webhooks', 'Webhooks');
    expect(await page.textContent('main')).toContain('No webhooks yet');
    await checkPage(page, 'webhooks');

    await open(page, '#/providers', 'BYOI providers');
    expect(await page.textContent('main')).toContain("Berth's own providers are in use");
    await checkPage(page, 'providers');

    await open(page, '#/team', 'Team and roles');
    await checkPage(page, 'team');

    await open(page, '#/audit', 'Audit log');
    const actions = await page.$$eval('main tbody tr td:nth-child(3)', (cells) => cells.map((cell) => cell.textContent));
    expect(actions).toEqual(expect.arrayContaining(['api_key.created', 'secrets.set']));
    await checkPage(page, 'audit');
  });

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
