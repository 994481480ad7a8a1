import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { launchChromium } from '../helpers/chromium.js';
import { startFakeOpenAI, type FakeModelServer } from '../helpers/fake-models.js';
import { startCustomerSite } from '../helpers/page-server.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * The chat widget in a real headless Chromium (Debian's), on a customer's page of its own origin,
 * served by and talking to a real `berth up`: each reply is a run of the channel's agent
 * definition in a gVisor sandbox against a local server that speaks the OpenAI protocol. Opened
 * and used with the keyboard alone, the reply written as the model streams it, the history after
 * a reload, axe-core's checks, and a phone's width.
 */
const ARTIFACTS = join(ROOT, '.test-results', 'browser');
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const THEME = { primaryColor: '#0b6e4f', mode: 'light', position: 'bottom-right', title: 'Harbour help', greeting: 'Ask us about orders and deliveries.', placeholder: 'Ask a question' };
const QUESTION = 'When does my order ship?';
const ANSWER = 'Orders placed before 2 pm ship the same day.';
const FOLLOW_UP = 'And on weekends?';
const FOLLOW_UP_ANSWER = 'Weekend orders ship on Monday morning.';

/** What the widget's shadow root holds, read in the page. */
interface WidgetState {
  panelOpen: boolean;
  focused: string | null;
  messages: { role: string; text: string; id: string | null; writing: boolean }[];
  status: string;
}

async function widgetState(page: Page): Promise<WidgetState> {
  return page.evaluate(() => {
    const root = document.getElementById('berth-chat')?.shadowRoot;
    if (!root) throw new Error('the widget is not on the page');
    const active = root.activeElement;
    return {
      panelOpen: !(root.querySelector('[role=dialog]') as HTMLElement).hidden,
      focused: active ? (active.getAttribute('aria-label') ?? active.id ?? active.tagName) : null,
      messages: [...root.querySelectorAll<HTMLElement>('[role=log] .message')].map((node) => ({
        role: node.classList.contains('visitor') ? 'user' : 'assistant',
        text: node.querySelector('.text')!.textContent!,
        id: node.dataset.messageId ?? null,
        writing: node.classList.contains('writing'),
      })),
      status: root.querySelector('[role=status]')!.textContent!,
    };
  });
}

async function until(page: Page, what: string, predicate: (state: WidgetState) => boolean, timeoutMs = 60_000): Promise<WidgetState> {
  const deadline = Date.now() + timeoutMs;
  let state = await widgetState(page);
  while (!predicate(state)) {
    if (Date.now() > deadline) throw new Error(`widget: ${what} did not happen; the widget shows ${JSON.stringify(state)}`);
    await page.waitForTimeout(50);
    state = await widgetState(page);
  }
  return state;
}

async function axeViolations(page: Page): Promise<{ id: string; impact: string; nodes: string[] }[]> {
  await page.addScriptTag({ content: AXE_SOURCE });
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(context: Document): Promise<{ violations: { id: string; impact: string; nodes: { target: unknown[] }[] }[] }> } }).axe;
    const result = await axe.run(document);
    return result.violations.map((violation) => ({ id: violation.id, impact: violation.impact, nodes: violation.nodes.map((node) => JSON.stringify(node.target)) }));
  });
}

describe('the chat widget in Chromium', () => {
  let model: FakeModelServer;
  let berth: BerthProcess;
  let site: Awaited<ReturnType<typeof startCustomerSite>>;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let channel: { id: string; scriptTag: string };
  const dataDir = tempDir('berth-widget-');
  const requests: string[] = [];

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    model = await startFakeOpenAI((body: any) => {
      const last = body.messages.filter((message: any) => message.role === 'user').at(-1);
      const text = typeof last.content === 'string' ? last.content : last.content.map((part: any) => part.text).join('');
      // Written slowly, in pieces: the widget shows the reply as it comes.
      if (text === QUESTION) return { text: ANSWER, pauseMs: 400 };
      if (text === FOLLOW_UP) return { text: FOLLOW_UP_ANSWER };
      return { text: `Noted: ${text}` };
    });
    berth = await startBerth({
      dataDir,
      env: {
        DATABASE_URL: await createTestDatabase(),
        BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }),
        BERTH_MODEL_PRICES: JSON.stringify({ 'openai/gpt-4o-mini': { input: '1.00', output: '1.00' } }),
        // Two messages a minute per visitor: the third of the test is refused.
        BERTH_CHANNEL_LIMITS: JSON.stringify({ visitorMessages: 2 }),
      },
    });
    site = await startCustomerSite(() => channel.scriptTag);
    const live = berth.api(berth.liveKey!);
    const definition = await live.post('/v1/agent-definitions', { name: 'harbour-help', model: 'openai/gpt-4o-mini', systemPrompt: 'You answer questions about orders.', timeout: '10m' });
    expect(definition.status, JSON.stringify(definition.body)).toBe(201);
    const created = await live.post('/v1/channels', { type: 'chat_embed', agent: 'harbour-help', theme: THEME, allowedOrigins: [site.origin] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    channel = created.body;
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    page.on('request', (request) => requests.push(request.url()));
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await site?.close();
    expect(await berth?.stop()).toBe(0);
    removeDataDir(dataDir);
    await model?.close();
  });

  it('serves the widget: JavaScript, gzipped, cached a day with an ETag, loadable from any origin', async () => {
    const url = `${berth.baseUrl}/widget/v1/berth-chat.js`;
    const built = readFileSync(join(ROOT, 'widget', 'dist', 'berth-chat.js'));
    const plain = await fetch(url, { headers: { 'accept-encoding': 'identity' } });
    expect(plain.status).toBe(200);
    expect(Object.fromEntries(['content-type', 'cache-control', 'access-control-allow-origin', 'cross-origin-resource-policy', 'x-content-type-options', 'vary'].map((name) => [name, plain.headers.get(name)]))).toEqual({
      'content-type': 'text/javascript; charset=utf-8',
      'cache-control': 'public, max-age=86400, stale-while-revalidate=604800',
      'access-control-allow-origin': '*',
      'cross-origin-resource-policy': 'cross-origin',
      'x-content-type-options': 'nosniff',
      vary: 'Accept-Encoding',
    });
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(Buffer.from(await plain.arrayBuffer()).equals(built)).toBe(true);
    const etag = plain.headers.get('etag')!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{27}"$/);

    // fetch undoes the gzip; the length on the wire is the compressed one.
    const gzipped = await fetch(url, { headers: { 'accept-encoding': 'gzip' } });
    expect(gzipped.headers.get('content-encoding')).toBe('gzip');
    expect(Number(gzipped.headers.get('content-length'))).toBeLessThan(built.length / 2);
    expect(Buffer.from(await gzipped.arrayBuffer()).equals(built)).toBe(true);

    const cached = await fetch(url, { headers: { 'if-none-match': etag } });
    expect(cached.status).toBe(304);
    expect(await cached.text()).toBe('');
    expect((await fetch(url, { headers: { 'if-none-match': '"another"' } })).status).toBe(200);
  });

  it('opens with the keyboard, sends a message and shows the reply streamed from the model', async () => {
    await page.goto(site.url);
    await page.waitForFunction(() => document.getElementById('berth-chat')?.shadowRoot?.querySelector('button.launcher'));
    // The theme reached the button: its color and its accessible name.
    const launcher = await page.evaluate(() => {
      const button = document.getElementById('berth-chat')!.shadowRoot!.querySelector<HTMLButtonElement>('button.launcher')!;
      return { name: button.getAttribute('aria-label'), background: getComputedStyle(button).backgroundColor, expanded: button.getAttribute('aria-expanded') };
    });
    expect(launcher).toEqual({ name: 'Harbour help', background: 'rgb(11, 110, 79)', expanded: 'false' });

    // Keyboard only: the page's link, then the chat button.
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    expect((await widgetState(page)).focused).toBe('Harbour help');
    await page.keyboard.press('Enter');
    let state = await until(page, 'the panel opening with the input focused', (s) => s.panelOpen && s.focused === 'berth-chat-input');
    expect(state.messages).toEqual([]);

    // Every text a reply shows on its way, and whether it was still being written.
    await page.evaluate(() => {
      const root = document.getElementById('berth-chat')!.shadowRoot!;
      const seen: string[] = [];
      (window as unknown as { replyTexts: string[] }).replyTexts = seen;
      new MutationObserver(() => {
        for (const node of root.querySelectorAll('.message.agent')) seen.push(`${node.classList.contains('writing') ? 'writing' : 'whole'}:${node.querySelector('.text')!.textContent}`);
      }).observe(root, { subtree: true, childList: true, characterData: true, attributes: true });
    });
    await page.keyboard.type(QUESTION);
    await page.keyboard.press('Enter');
    await until(page, 'the reply, whole', (s) => s.messages.some((m) => m.role === 'assistant' && m.text === ANSWER && !m.writing));
    const seen = await page.evaluate(() => (window as unknown as { replyTexts: string[] }).replyTexts);
    const written = seen.filter((text) => text.startsWith('writing:')).map((text) => text.slice('writing:'.length));
    expect(written.some((text) => text !== '' && text !== ANSWER && ANSWER.startsWith(text)), `texts shown: ${JSON.stringify(seen)}`).toBe(true);
    expect(seen.at(-1)).toBe(`whole:${ANSWER}`);
    state = await widgetState(page);
    expect(state.messages.map(({ role, text }) => ({ role, text }))).toEqual([
      { role: 'user', text: QUESTION },
      { role: 'assistant', text: ANSWER },
    ]);
    expect(state.focused).toBe('berth-chat-input');
    await page.screenshot({ path: join(ARTIFACTS, 'widget-desktop.png') });
  });

  it('passes axe-core with the panel open', async () => {
    const violations = await axeViolations(page);
    expect(violations).toEqual([]);
  });

  it('closes with Escape and gives the focus back to the button', async () => {
    await page.keyboard.press('Escape');
    const state = await until(page, 'the panel closing', (s) => !s.panelOpen);
    expect(state.focused).toBe('Harbour help');
    const expanded = await page.evaluate(() => document.getElementById('berth-chat')!.shadowRoot!.querySelector<HTMLButtonElement>('button.launcher')!.getAttribute('aria-expanded'));
    expect(expanded).toBe('false');
  });

  it('keeps the visitor across a reload and shows the history', async () => {
    const visitorBefore = await page.evaluate((key) => localStorage.getItem(key), `berth-chat:${channel.id}:visitor`);
    expect(visitorBefore).toMatch(/^v_[0-9a-f]{32}$/);
    await page.reload();
    await page.waitForFunction(() => document.getElementById('berth-chat')?.shadowRoot?.querySelector('button.launcher'));
    expect(await page.evaluate((key) => localStorage.getItem(key), `berth-chat:${channel.id}:visitor`)).toBe(visitorBefore);
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    const state = await until(page, 'the history after the reload', (s) => s.panelOpen && s.messages.length === 2);
    expect(state.messages.map(({ role, text }) => ({ role, text }))).toEqual([
      { role: 'user', text: QUESTION },
      { role: 'assistant', text: ANSWER },
    ]);

    // The conversation goes on: the model sees what was said before.
    await page.keyboard.type(FOLLOW_UP);
    await page.keyboard.press('Enter');
    await until(page, 'the follow-up reply, whole', (s) => s.messages.some((m) => m.text === FOLLOW_UP_ANSWER && !m.writing));
    const lastRequest = model.requests.at(-1) as { messages: { role: string; content: unknown }[] };
    expect(JSON.stringify(lastRequest.messages)).toContain(QUESTION);
    expect(JSON.stringify(lastRequest.messages)).toContain(ANSWER);
  });

  it('gives a refused message back to the input and says when to try again', async () => {
    // Two messages a visitor per window of a minute, and the windows are the clock's minutes: the
    // two sent so far and at most two more fit in the two windows this test spans; a third is refused.
    for (let attempt = 1; attempt <= 3; attempt++) {
      const before = await widgetState(page);
      const text = `One more thing (${attempt})`;
      await page.keyboard.type(text);
      await page.keyboard.press('Enter');
      const state = await until(
        page,
        'the refusal or the reply',
        (s) => s.status.startsWith('Too many messages') || (s.messages.length === before.messages.length + 2 && !s.messages.at(-1)!.writing),
      );
      if (!state.status.startsWith('Too many messages')) continue;
      expect(state.status).toMatch(/^Too many messages\. Try again in \d+ seconds?\.$/);
      expect(state.messages).toEqual(before.messages);
      expect(await page.evaluate(() => document.getElementById('berth-chat')!.shadowRoot!.querySelector('textarea')!.value)).toBe(text);
      expect(state.focused).toBe('berth-chat-input');
      return;
    }
    throw new Error('no message was refused: the visitor limit of 2 a minute did not hold');
  });

  it('fills a phone screen and passes axe-core there', async () => {
    const phone = await browser.newContext({ viewport: { width: 375, height: 667 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
    try {
      const small = await phone.newPage();
      await small.goto(site.url);
      await small.waitForFunction(() => document.getElementById('berth-chat')?.shadowRoot?.querySelector('button.launcher'));
      await small.evaluate(() => document.getElementById('berth-chat')!.shadowRoot!.querySelector<HTMLButtonElement>('button.launcher')!.click());
      await until(small, 'the panel opening on a phone', (s) => s.panelOpen);
      const box = await small.evaluate(() => {
        const rect = document.getElementById('berth-chat')!.shadowRoot!.querySelector('[role=dialog]')!.getBoundingClientRect();
        return { x: rect.x, y: rect.y, width: rect.width, height: rect.height };
      });
      expect(box).toEqual({ x: 0, y: 0, width: 375, height: 667 });
      await small.screenshot({ path: join(ARTIFACTS, 'widget-phone.png') });
      expect(await axeViolations(small)).toEqual([]);
    } finally {
      await phone.close();
    }
  });

  it('reads well in a dark theme with a light primary color', async () => {
    const live = berth.api(berth.liveKey!);
    const created = await live.post('/v1/channels', { type: 'chat_embed', agent: 'harbour-help', theme: { mode: 'dark', primaryColor: '#ffd400', title: 'Night desk' } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const darkSite = await startCustomerSite(() => created.body.scriptTag);
    const dark = await context.newPage();
    try {
      await dark.goto(darkSite.url);
      await dark.waitForFunction(() => document.getElementById('berth-chat')?.shadowRoot?.querySelector('button.launcher'));
      await dark.evaluate(() => document.getElementById('berth-chat')!.shadowRoot!.querySelector<HTMLButtonElement>('button.launcher')!.click());
      await until(dark, 'the dark panel opening', (s) => s.panelOpen);
      const colors = await dark.evaluate(() => {
        const root = document.getElementById('berth-chat')!.shadowRoot!;
        const style = (selector: string) => getComputedStyle(root.querySelector(selector)!);
        return { panel: style('[role=dialog]').backgroundColor, heading: style('h2').color, send: style('.send').color };
      });
      // Near-black text on the yellow; a dark panel.
      expect(colors).toEqual({ panel: 'rgb(29, 31, 36)', heading: 'rgb(17, 17, 17)', send: 'rgb(17, 17, 17)' });
      await dark.screenshot({ path: join(ARTIFACTS, 'widget-dark.png') });
      expect(await axeViolations(dark)).toEqual([]);
    } finally {
      await dark.close();
      await darkSite.close();
    }
  });

  it('works on a page whose Content Security Policy allows nothing but the Berth server, with Trusted Types', async () => {
    const api = new URL(berth.baseUrl).origin;
    const created = await berth.api(berth.liveKey!).post('/v1/channels', { type: 'chat_embed', agent: 'harbour-help', theme: THEME });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const strictSite = await startCustomerSite(() => created.body.scriptTag, {
      'content-security-policy': `default-src 'none'; script-src ${api}; connect-src ${api}; require-trusted-types-for 'script'`,
    });
    const strict = await context.newPage();
    try {
      await strict.addInitScript(() => {
        const seen: string[] = [];
        (window as unknown as { violations: string[] }).violations = seen;
        document.addEventListener('securitypolicyviolation', (event) => seen.push(`${event.violatedDirective} ${event.blockedURI}`));
      });
      await strict.goto(strictSite.url);
      await strict.waitForFunction(() => document.getElementById('berth-chat')?.shadowRoot?.querySelector('button.launcher'));
      await strict.evaluate(() => document.getElementById('berth-chat')!.shadowRoot!.querySelector<HTMLButtonElement>('button.launcher')!.click());
      await until(strict, 'the panel opening under the policy', (s) => s.panelOpen && s.focused === 'berth-chat-input');
      await strict.keyboard.type('Is this page strict?');
      await strict.keyboard.press('Enter');
      await until(strict, 'the reply under the policy', (s) => s.messages.some((m) => m.text === 'Noted: Is this page strict?' && !m.writing));
      const background = await strict.evaluate(() => getComputedStyle(document.getElementById('berth-chat')!.shadowRoot!.querySelector('button.launcher')!).backgroundColor);
      expect(background).toBe('rgb(11, 110, 79)');
      expect(await strict.evaluate(() => (window as unknown as { violations: string[] }).violations)).toEqual([]);
    } finally {
      await strict.close();
      await strictSite.close();
    }
  });

  it('shows no button on a page whose origin the channel does not allow', async () => {
    const other = await startCustomerSite(() => channel.scriptTag);
    const elsewhere = await context.newPage();
    try {
      const refused = new Promise<string>((resolve) =>
        elsewhere.on('console', (message) => message.text().startsWith('berth-chat:') && resolve(`${message.type()}: ${message.text()}`)),
      );
      await elsewhere.goto(other.url);
      expect(await refused).toMatch(new RegExp(`^error: berth-chat: channel ${channel.id} is not available: `));
      expect(await elsewhere.evaluate(() => document.getElementById('berth-chat'))).toBeNull();
    } finally {
      await elsewhere.close();
      await other.close();
    }
  });

  it('asks nothing of any host but the page and the Berth server', () => {
    const origins = new Set(requests.map((url) => new URL(url).origin));
    expect([...origins].sort()).toEqual([site.origin, new URL(berth.baseUrl).origin].sort());
  });
});
