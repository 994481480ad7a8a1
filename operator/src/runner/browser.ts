import type { ToolContext, ToolOutcome, ToolSpec } from './tools.js';

/*
 * Browser tools (browser_navigate, ...): each call runs one program in the agent's sandbox, which
 * starts Chromium there when it is not running yet (berth-browser, DevTools on 127.0.0.1:9222),
 * drives its first tab over the Chrome DevTools Protocol and prints one JSON line. Chromium
 * outlives the program, so the page and its state carry over from one call to the next.
 *
 * Only type imports from tools.ts: it imports this module, and a value import back would be a
 * cycle in which whichever module loads second sees the other's exports uninitialized.
 */

/**
 * The program that runs in the sandbox (Node.js 24), the same for every tool; `browserProgram`
 * puts the request before it. Plain JavaScript, which Node runs as TypeScript unchanged: nothing
 * checks its types, and annotations would only pretend otherwise. It holds no backquote and no
 * dollar-brace, so that it fits in this raw template literal as written.
 */
const SANDBOX_PROGRAM = String.raw`
import { spawn } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

const DEVTOOLS = 'http://127.0.0.1:9222';
// Chromium's output goes here: a pipe to this program would keep the exec open while Chromium runs.
const LAUNCH_LOG = '/tmp/berth-browser.log';
// A desktop-sized page; headless Chromium's default of 800x600 gets many sites' narrow layouts.
const WINDOW_SIZE = '--window-size=1280,800';
// How long a click or Enter has to start a navigation before we stop waiting for one.
const NAVIGATION_GRACE_MS = 300;
// Characters of page text sent back: the model reads at most 16 KiB of a tool's output.
const TEXT_LIMIT = 12000;
// Tall pages are cut here in full-page screenshots; Chromium fails on very large captures.
const FULL_PAGE_MAX_HEIGHT = 10000;
// A page that does not evaluate 0 within this time is blocked (a dialog, a busy script).
const RESPONSIVE_MS = 5000;
// Kept back from waiting for a load, to read the title of a page that is still loading.
const LOAD_MARGIN_MS = 1000;

const deadline = Date.now() + REQUEST.budgetMs;
let step = 'starting';

function fail(message) {
  process.stderr.write(message + '\n');
  process.exit(1);
}

// The exec's own timeout would kill this program silently; saying what it was doing helps more.
setTimeout(() => fail('gave up after ' + Math.round(REQUEST.budgetMs / 1000) + ' s while ' + step), REQUEST.budgetMs);

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
/** What promise resolves to, or undefined when it takes longer than ms. */
const within = (promise, ms) => Promise.race([promise, sleep(ms).then(() => undefined)]);
const msLeft = () => Math.max(0, deadline - Date.now());

/** A DevTools HTTP endpoint's JSON answer, or undefined while Chromium does not answer. */
async function devtools(path, method) {
  try {
    const response = await fetch(DEVTOOLS + path, { method: method || 'GET', signal: AbortSignal.timeout(2000) });
    return response.ok ? await response.json() : undefined;
  } catch {
    return undefined;
  }
}

function logTail() {
  try {
    return readFileSync(LAUNCH_LOG, 'utf8').trim().split('\n').slice(-10).join('\n');
  } catch {
    return '(no log)';
  }
}

async function ensureBrowser() {
  if (await devtools('/json/version')) return;
  step = 'starting Chromium (it goes on starting: call again)';
  const log = openSync(LAUNCH_LOG, 'a');
  // Detached: in a session of its own, Chromium survives this program and the exec's timeout,
  // which kills this program's process group.
  const browser = spawn('berth-browser', [WINDOW_SIZE], { detached: true, stdio: ['ignore', log, log] });
  let startFailure;
  browser.on('error', (error) => {
    startFailure = 'could not start berth-browser (' + error.message + '); browser tools need a browser agent';
  });
  browser.on('exit', (code, signal) => {
    startFailure = 'Chromium exited at start (' + (signal || 'exit code ' + code) + '); the end of ' + LAUNCH_LOG + ':\n' + logTail();
  });
  browser.unref();
  // Answering beats exiting: a second Chromium that lost the port to a first one exits, harmlessly.
  while (!(await devtools('/json/version'))) {
    if (startFailure) fail(startFailure);
    await sleep(100);
  }
}

/** The tab the tools share: the first page target, or a new blank one when there is none. */
async function pageTarget() {
  step = 'finding the page';
  const targets = (await devtools('/json/list')) || [];
  const page = targets.find((target) => target.type === 'page') || (await devtools('/json/new?about:blank', 'PUT'));
  if (!page || !page.webSocketDebuggerUrl) fail('Chromium has no page to drive and did not open one');
  return page;
}

/** One DevTools connection to the page: commands answered by id, and events to wait for. */
class Cdp {
  static connect(url) {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url);
      socket.addEventListener('open', () => resolve(new Cdp(socket)), { once: true });
      socket.addEventListener('error', () => reject(new Error('could not connect to the page at ' + url)), { once: true });
    });
  }

  constructor(socket) {
    this.socket = socket;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = new Set();
    socket.addEventListener('message', (message) => this.receive(JSON.parse(message.data)));
    socket.addEventListener('close', () => {
      for (const call of this.pending.values()) call.reject(new Error('Chromium closed the connection to the page during ' + call.method));
      this.pending.clear();
    });
  }

  receive(message) {
    if (message.id === undefined) {
      for (const listener of [...this.listeners]) listener(message.method, message.params);
      return;
    }
    const call = this.pending.get(message.id);
    if (!call) return;
    this.pending.delete(message.id);
    if (message.error) call.reject(new Error(call.method + ' failed: ' + message.error.message));
    else call.resolve(message.result);
  }

  send(method, params) {
    const id = this.nextId++;
    const answer = new Promise((resolve, reject) => this.pending.set(id, { method, resolve, reject }));
    this.socket.send(JSON.stringify({ id, method, params: params || {} }));
    return answer;
  }

  /**
   * The params of the next event named method (that accept passes), or undefined after ms.
   * Listens from the call on: call it before the command that causes the event.
   */
  waitFor(method, ms, accept) {
    return new Promise((resolve) => {
      const finish = (params) => {
        clearTimeout(timer);
        this.listeners.delete(listener);
        resolve(params);
      };
      const listener = (name, params) => {
        if (name === method && (!accept || accept(params))) finish(params);
      };
      const timer = setTimeout(() => finish(undefined), ms);
      this.listeners.add(listener);
    });
  }

  /** Calls handle with the params of every event named method from now on. */
  on(method, handle) {
    this.listeners.add((name, params) => {
      if (name === method) handle(params);
    });
  }
}

/** Calls fn in the page with JSON arguments and returns its JSON result; the page's exceptions become errors. */
async function inPage(cdp, fn, ...args) {
  const expression = '(' + fn.toString() + ')(' + args.map((arg) => JSON.stringify(arg)).join(', ') + ')';
  const { result, exceptionDetails } = await cdp.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
  if (exceptionDetails) throw new Error('the page threw: ' + ((exceptionDetails.exception && exceptionDetails.exception.description) || exceptionDetails.text));
  return result.value;
}

// Page functions: they run in the page (sent as source by inPage), so each is self-contained.

function pageInfo() {
  return { url: location.href, title: document.title };
}

/** The first match of selector, scrolled to the middle of the view and focused on request: where its centre is. */
function prepareElement(selector, focus) {
  // A few classes name an element well enough; utility-class pages give some dozens.
  const describe = (node) => {
    const classes = typeof node.className === 'string' ? node.className.split(/\s+/).filter(Boolean).slice(0, 3) : [];
    return '<' + node.tagName.toLowerCase() + (node.id ? '#' + node.id : '') + classes.map((name) => '.' + name).join('') + '>';
  };
  let matches;
  try {
    matches = document.querySelectorAll(selector);
  } catch (error) {
    return { problem: 'invalid CSS selector ' + JSON.stringify(selector) + ': ' + error.message };
  }
  const element = matches[0];
  if (!element) return { problem: 'no element matches the CSS selector ' + JSON.stringify(selector) + ' on ' + location.href };
  element.scrollIntoView({ block: 'center', inline: 'center' });
  const box = element.getBoundingClientRect();
  if (box.width === 0 || box.height === 0) return { problem: JSON.stringify(selector) + ' matches ' + describe(element) + ', which is not visible (it has no size)' };
  const x = box.left + box.width / 2;
  const y = box.top + box.height / 2;
  if (focus) {
    element.focus();
    if (document.activeElement !== element) return { problem: describe(element) + ' cannot take keyboard focus' };
    // Type after what the field holds, as a user who clicks into it at its end would.
    try {
      element.setSelectionRange(element.value.length, element.value.length);
    } catch {}
  }
  const hit = document.elementFromPoint(x, y);
  return {
    x,
    y,
    matches: matches.length,
    element: describe(element),
    label: (element.innerText || element.value || element.getAttribute('aria-label') || '').trim().slice(0, 80),
    coveredBy: hit && hit !== element && !element.contains(hit) ? describe(hit) : undefined,
  };
}

function fieldValue(selector) {
  const element = document.querySelector(selector);
  if (!element || element.type === 'password') return undefined;
  return typeof element.value === 'string' ? element.value : element.innerText;
}

function visibleText(selector, limit) {
  let element = document.body || document.documentElement;
  if (selector) {
    try {
      element = document.querySelector(selector);
    } catch (error) {
      return { problem: 'invalid CSS selector ' + JSON.stringify(selector) + ': ' + error.message };
    }
    if (!element) return { problem: 'no element matches the CSS selector ' + JSON.stringify(selector) + ' on ' + location.href };
  }
  const text = (element.innerText !== undefined ? element.innerText : element.textContent) || '';
  return { text: text.slice(0, limit), length: text.length };
}

async function located(cdp, selector, focus) {
  step = 'finding ' + selector;
  const target = await inPage(cdp, prepareElement, selector, focus);
  if (target.problem) fail(target.problem);
  return target;
}

/** The next load event of the page, or undefined when none comes in the time left. */
function nextLoad(cdp) {
  return cdp.waitFor('Page.loadEventFired', Math.max(0, msLeft() - LOAD_MARGIN_MS));
}

/**
 * Runs act (a click, an Enter) and, when it starts loading another page in the tab, waits for
 * that page to load, so that the next call finds it rather than the one being left. Resolves to
 * false when the page had not loaded in the time left.
 */
async function settling(cdp, act) {
  const { frameTree } = await cdp.send('Page.getFrameTree');
  // Frames inside the page load too; only the tab's own frame matters here.
  const started = cdp.waitFor('Page.frameStartedLoading', NAVIGATION_GRACE_MS, ({ frameId }) => frameId === frameTree.frame.id);
  const loaded = nextLoad(cdp);
  await act();
  if (!(await started)) return true;
  step = 'waiting for the page to load';
  return (await loaded) !== undefined;
}

// Actions: one per tool, each resolving to the JSON the tool formats.

async function navigate(cdp, { url }) {
  await cdp.send('Network.enable');
  const responses = [];
  cdp.on('Network.responseReceived', (event) => responses.push(event));
  const loaded = nextLoad(cdp);
  step = 'opening ' + url;
  const navigation = await cdp.send('Page.navigate', { url });
  if (navigation.errorText) fail('could not open ' + url + ': ' + navigation.errorText);
  step = 'waiting for ' + url + ' to load';
  // Without a loader id the navigation stayed in the document (a #fragment): no load event comes.
  const complete = !navigation.loaderId || (await loaded) !== undefined;
  // The document's request id is the navigation's loader id; after redirects, its last response is the final one.
  const documentResponse = responses.filter((event) => event.requestId === navigation.loaderId).pop();
  return { ...(await inPage(cdp, pageInfo)), status: documentResponse ? documentResponse.response.status : undefined, complete };
}

async function screenshot(cdp, { path, fullPage }) {
  const file = resolve('/workspace', path);
  const params = { format: 'png' };
  let cut = false;
  if (fullPage) {
    const { cssContentSize } = await cdp.send('Page.getLayoutMetrics');
    cut = cssContentSize.height > FULL_PAGE_MAX_HEIGHT;
    const height = Math.min(Math.ceil(cssContentSize.height), FULL_PAGE_MAX_HEIGHT);
    params.captureBeyondViewport = true;
    params.clip = { x: 0, y: 0, width: Math.ceil(cssContentSize.width), height, scale: 1 };
  }
  step = 'taking the screenshot';
  const { data } = await cdp.send('Page.captureScreenshot', params);
  const png = Buffer.from(data, 'base64');
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, png);
  // A PNG's size is in its IHDR chunk, right after the 8-byte signature and the chunk's length and type.
  return { path: file, width: png.readUInt32BE(16), height: png.readUInt32BE(20), bytes: png.length, cut, ...(await inPage(cdp, pageInfo)) };
}

async function click(cdp, { selector }) {
  const target = await located(cdp, selector, false);
  step = 'clicking ' + target.element;
  const complete = await settling(cdp, async () => {
    const at = { x: target.x, y: target.y };
    await cdp.send('Input.dispatchMouseEvent', { type: 'mouseMoved', ...at });
    await cdp.send('Input.dispatchMouseEvent', { type: 'mousePressed', ...at, button: 'left', buttons: 1, clickCount: 1 });
    await cdp.send('Input.dispatchMouseEvent', { type: 'mouseReleased', ...at, button: 'left', buttons: 0, clickCount: 1 });
  });
  return { ...target, complete, ...(await inPage(cdp, pageInfo)) };
}

async function type(cdp, { selector, text, submit }) {
  const target = await located(cdp, selector, true);
  step = 'typing into ' + target.element;
  await cdp.send('Input.insertText', { text });
  const value = await inPage(cdp, fieldValue, selector);
  let complete = true;
  if (submit) {
    step = 'pressing Enter';
    // The text '\r' is what makes Enter a keypress that submits a form, as a real key does.
    const enter = { key: 'Enter', code: 'Enter', windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13 };
    complete = await settling(cdp, async () => {
      await cdp.send('Input.dispatchKeyEvent', { type: 'keyDown', ...enter, text: '\r' });
      await cdp.send('Input.dispatchKeyEvent', { type: 'keyUp', ...enter });
    });
  }
  return { element: target.element, matches: target.matches, value, complete, ...(await inPage(cdp, pageInfo)) };
}

async function text(cdp, { selector }) {
  step = 'reading the text';
  const found = await inPage(cdp, visibleText, selector || '', TEXT_LIMIT);
  if (found.problem) fail(found.problem);
  return { ...found, ...(await inPage(cdp, pageInfo)) };
}

/**
 * An open dialog (alert, confirm, prompt, leave this page?) blocks the page and every command
 * after it, a click included: accept each one, and say so in the result.
 */
function acceptDialogs(cdp) {
  const dialogs = [];
  cdp.on('Page.javascriptDialogOpening', ({ type, message }) => {
    dialogs.push({ type, message });
    cdp.send('Page.handleJavaScriptDialog', { accept: true }).catch(() => {});
  });
  return dialogs;
}

/**
 * A dialog the page opened between two calls has no one to accept it: it blocks the page, and
 * no later connection can close it. Only a navigation does, so navigate leaves such a page for
 * a blank one first, and the other tools say what is wrong instead of waiting out their time.
 */
async function unblock(cdp) {
  step = 'checking that the page responds';
  if (await within(cdp.send('Runtime.evaluate', { expression: '0' }), Math.min(RESPONSIVE_MS, msLeft()))) return false;
  if (REQUEST.action !== 'navigate') {
    fail('the page does not respond: it is probably showing a dialog (alert, confirm, prompt) it opened after the last browser call, or running a long script. browser_navigate (to this URL again or another) replaces it.');
  }
  step = 'leaving the page that does not respond';
  await cdp.send('Page.navigate', { url: 'about:blank' });
  return true;
}

const ACTIONS = { navigate, screenshot, click, type, text };

async function main() {
  await ensureBrowser();
  const page = await pageTarget();
  step = 'connecting to the page';
  const cdp = await Cdp.connect(page.webSocketDebuggerUrl);
  const dialogs = acceptDialogs(cdp);
  const leftBlockedPage = await unblock(cdp);
  // Page events (loads, dialogs) come only once the domain is enabled.
  await cdp.send('Page.enable');
  const result = await ACTIONS[REQUEST.action](cdp, REQUEST.args);
  return { ...result, ...(dialogs.length > 0 ? { dialogs } : {}), ...(leftBlockedPage ? { leftBlockedPage } : {}) };
}

// Exit at once: the open socket and any wait still pending must not hold the exec.
main().then(
  (result) => {
    process.stdout.write(JSON.stringify(result) + '\n');
    process.exit(0);
  },
  (error) => fail(error.message),
);
`;

export type BrowserAction = 'navigate' | 'screenshot' | 'click' | 'type' | 'text';

/**
 * Time the program gives itself within the exec's limit, keeping back enough to report what it
 * was doing before the exec's timeout kills it.
 */
export function programBudgetMs(timeoutMs: number): number {
  return timeoutMs - Math.min(2_000, Math.floor(timeoutMs / 5));
}

/**
 * The sandbox program for one call. The request goes in as a JSON string inside a JSON string
 * (a valid JavaScript string literal), so no argument is ever spliced into code unescaped.
 */
export function browserProgram(action: BrowserAction, args: Record<string, unknown>, timeoutMs: number): string {
  const request = { action, args, budgetMs: programBudgetMs(timeoutMs) };
  return `const REQUEST = JSON.parse(${JSON.stringify(JSON.stringify(request))});\n${SANDBOX_PROGRAM}`;
}

/** A tool input the model got wrong; answered as an error it can correct, as tools.ts does. */
class InvalidInput extends Error {}

function requiredString(input: Record<string, unknown>, name: string): string {
  const value = input[name];
  if (typeof value !== 'string' || value === '') throw new InvalidInput(`"${name}" must be a non-empty string`);
  return value;
}

function optionalString(input: Record<string, unknown>, name: string): string | undefined {
  return input[name] === undefined ? undefined : requiredString(input, name);
}

function optionalBoolean(input: Record<string, unknown>, name: string): boolean {
  const value = input[name];
  if (value !== undefined && typeof value !== 'boolean') throw new InvalidInput(`"${name}" must be true or false`);
  return value === true;
}

interface PageResult {
  url: string;
  title: string;
}

/** The page line most answers end with. */
function pageLine(result: PageResult): string {
  return `Page: ${result.url}${result.title ? ` (title: ${JSON.stringify(result.title)})` : ''}`;
}

interface ElementResult extends PageResult {
  element: string;
  matches: number;
}

/** A dialog the page opened during the call; the program accepted it. */
interface Dialog {
  type: string;
  message: string;
}

/** What any action may add to its result; each becomes a line of the answer. */
interface CommonResult {
  dialogs?: Dialog[];
  leftBlockedPage?: boolean;
  /** False when a page the call opened had not loaded by the end of its time. */
  complete?: boolean;
}

function describeDialog(dialog: Dialog): string {
  return `The page opened a dialog (${dialog.type}) saying ${JSON.stringify(dialog.message)}; it was accepted with OK.`;
}

const NOT_LOADED_NOTE = 'The page had not finished loading when time ran out; it may still be incomplete.';

const BLOCKED_PAGE_NOTE =
  'The previous page did not respond (probably a dialog it opened after the last browser call), so it was replaced.';

function whichMatch(result: ElementResult): string {
  return result.matches > 1 ? ` (the first of ${result.matches} matches)` : '';
}

interface BrowserToolDefinition<Args, Result> {
  name: string;
  description: string;
  properties: Record<string, unknown>;
  required: string[];
  action: BrowserAction;
  /** The program's arguments from the model's input; throws InvalidInput. */
  parse(input: Record<string, unknown>): Args;
  /** What the model reads of the program's result. */
  describe(result: Result, args: Args): string;
}

function browserTool<Args extends Record<string, unknown>, Result>(definition: BrowserToolDefinition<Args, Result>): ToolSpec {
  return {
    name: definition.name,
    description: definition.description,
    inputSchema: { type: 'object', properties: definition.properties, required: definition.required, additionalProperties: false },
    needsBrowser: true,
    async run(input, context) {
      let args: Args;
      try {
        args = definition.parse(input);
      } catch (error) {
        if (error instanceof InvalidInput) return { output: `invalid input: ${error.message}`, isError: true };
        throw error;
      }
      const answer = await runProgram(context, definition.action, args);
      if ('failure' in answer) return answer.failure;
      const result = answer.result as Result & CommonResult;
      const output = [
        ...(result.leftBlockedPage ? [BLOCKED_PAGE_NOTE] : []),
        definition.describe(result, args),
        ...(result.complete === false ? [NOT_LOADED_NOTE] : []),
        ...(result.dialogs ?? []).map(describeDialog),
      ].join('\n');
      return { output, isError: false, exitCode: 0 };
    },
  };
}

async function runProgram(
  context: ToolContext,
  action: BrowserAction,
  args: Record<string, unknown>,
): Promise<{ result: unknown } | { failure: ToolOutcome }> {
  const code = browserProgram(action, args, context.timeoutMs);
  const run = await context.provider.exec(context.sandbox, { language: 'typescript', code, timeoutMs: context.timeoutMs });
  if (run.exitCode !== 0) {
    const output = run.stderr.trim() || `the browser program failed with exit code ${run.exitCode}`;
    return { failure: { output, isError: true, exitCode: run.exitCode } };
  }
  const line = run.stdout.trim().split('\n').pop() ?? '';
  try {
    return { result: JSON.parse(line) as unknown };
  } catch {
    return { failure: { output: `the browser program printed no result: ${run.stdout.slice(0, 500)}`, isError: true, exitCode: 0 } };
  }
}

const SELECTOR = { type: 'string', description: 'CSS selector, e.g. "#submit", "form input[name=q]" or "a[href*=login]"' };

/** `screenshot-2024-05-01T10-20-30-123Z.png`: sortable, and valid as a file name everywhere. */
export function defaultScreenshotPath(now: Date): string {
  return `screenshot-${now.toISOString().replace(/[:.]/g, '-')}.png`;
}

export const BROWSER_TOOLS: ToolSpec[] = [
  browserTool<{ url: string }, PageResult & { status?: number }>({
    name: 'browser_navigate',
    description:
      "Open a URL in your sandbox's web browser (headless Chromium; the tab, its cookies and storage persist between browser tool calls) and wait for the page to load. Answers with the final URL after redirects, the HTTP status and the page title. Files in your sandbox open as file:///workspace/<path>.",
    properties: { url: { type: 'string', description: 'absolute URL, e.g. https://example.com/ or file:///workspace/index.html' } },
    required: ['url'],
    action: 'navigate',
    parse(input) {
      const url = requiredString(input, 'url');
      if (!URL.canParse(url)) throw new InvalidInput(`"url" must be an absolute URL with a scheme, such as https://${url}`);
      return { url };
    },
    describe: (result) =>
      [
        `Opened ${result.url}${result.status ? ` (HTTP ${result.status})` : ''}`,
        `Title: ${result.title ? JSON.stringify(result.title) : '(none)'}`,
      ].join('\n'),
  }),
  browserTool<{ path: string; fullPage: boolean }, PageResult & { path: string; width: number; height: number; bytes: number; cut: boolean }>({
    name: 'browser_screenshot',
    description:
      'Save a PNG screenshot of the current browser page as a file in your sandbox. Answers with its path, its size in pixels and bytes (not the image itself). Relative paths are under /workspace.',
    properties: {
      path: { type: 'string', description: 'where to save the PNG, absolute or relative to /workspace; default screenshot-<time>.png' },
      fullPage: { type: 'boolean', description: 'capture the whole scrollable page, not only the part in view (the window is 1280 pixels wide)' },
    },
    required: [],
    action: 'screenshot',
    parse: (input) => ({
      path: optionalString(input, 'path') ?? defaultScreenshotPath(new Date()),
      fullPage: optionalBoolean(input, 'fullPage'),
    }),
    describe: (result) =>
      [
        `Saved ${result.path}: ${result.width}x${result.height} pixels, ${result.bytes} bytes (PNG)`,
        ...(result.cut ? ['The page is taller than that; the capture stops there.'] : []),
        pageLine(result),
      ].join('\n'),
  }),
  browserTool<{ selector: string }, ElementResult & { label: string; coveredBy?: string }>({
    name: 'browser_click',
    description:
      'Click the first element on the current browser page that matches a CSS selector: scrolls it into view and clicks its centre with real mouse events. When the click opens another page, waits for it to load. Fails when nothing matches.',
    properties: { selector: SELECTOR },
    required: ['selector'],
    action: 'click',
    parse: (input) => ({ selector: requiredString(input, 'selector') }),
    describe: (result) =>
      [
        `Clicked ${result.element}${result.label ? ` ${JSON.stringify(result.label)}` : ''}${whichMatch(result)}`,
        ...(result.coveredBy ? [`Note: ${result.coveredBy} covers its centre and got the click.`] : []),
        pageLine(result),
      ].join('\n'),
  }),
  browserTool<{ selector: string; text: string; submit: boolean }, ElementResult & { value?: string }>({
    name: 'browser_type',
    description:
      'Type text into the first element on the current browser page that matches a CSS selector (an input, a textarea or an editable element): focuses it and adds the text after what it holds. With submit, then presses Enter (which submits a form) and waits for any page it opens to load.',
    properties: {
      selector: SELECTOR,
      text: { type: 'string', description: 'the text to type' },
      submit: { type: 'boolean', description: 'press Enter after typing' },
    },
    required: ['selector', 'text'],
    action: 'type',
    parse(input) {
      const text = input.text;
      if (typeof text !== 'string') throw new InvalidInput('"text" must be a string');
      return { selector: requiredString(input, 'selector'), text, submit: optionalBoolean(input, 'submit') };
    },
    describe: (result, args) =>
      [
        `Typed ${args.text.length} characters into ${result.element}${whichMatch(result)}${args.submit ? ', then pressed Enter' : ''}`,
        ...(result.value !== undefined ? [`Its value after typing: ${JSON.stringify(result.value.slice(0, 200))}`] : []),
        pageLine(result),
      ].join('\n'),
  }),
  browserTool<{ selector?: string }, PageResult & { text: string; length: number }>({
    name: 'browser_text',
    description:
      'Read the visible text of the current browser page, or of the first element that matches a CSS selector, with the page URL and title. Long text is cut: pass a selector to read a part of the page.',
    properties: { selector: { ...SELECTOR, description: `${SELECTOR.description}; omit for the whole page` } },
    required: [],
    action: 'text',
    parse: (input) => {
      const selector = optionalString(input, 'selector');
      return selector === undefined ? {} : { selector };
    },
    describe: (result) =>
      [
        `URL: ${result.url}`,
        `Title: ${result.title ? JSON.stringify(result.title) : '(none)'}`,
        '',
        result.text || '(no visible text)',
        ...(result.length > result.text.length
          ? ['', `[text cut: showing ${result.text.length} of ${result.length} characters; pass a selector to read a part of the page]`]
          : []),
      ].join('\n'),
  }),
];
