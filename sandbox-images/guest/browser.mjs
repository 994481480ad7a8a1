// The browser driver: each browser tool call runs this program in the agent's sandbox (Node.js 24).
// It starts Chromium there when it is not running yet (berth-browser, DevTools on 127.0.0.1:9222),
// drives its first tab over the Chrome DevTools Protocol, and answers. Chromium outlives the
// program, so the page and its state carry over from one call to the next.
//
// The host runs it with its request set before it as `globalThis.BERTH_REQUEST = "<JSON>";` (a JSON
// string is a valid JavaScript string literal); run by hand, the request is the first argument.
// The request is {"action": "navigate" | "screenshot" | "click" | "type" | "text", "args": {...},
// "budgetMs": N}. The answer is one record on stdout: its JSON length in bytes, a newline, then
// {"ok": true, "result": {...}} with exit status 0, or {"ok": false, "error": "..."} with exit
// status 1. Any other exit, without a record, is a crash: stderr says why.
//
// Plain JavaScript (the host runs it as TypeScript, unchanged): nothing checks its types.

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

const REQUEST = JSON.parse(globalThis.BERTH_REQUEST ?? process.argv[2]);
const EXIT_OK = 0;
const EXIT_TOOL_ERROR = 1;
const deadline = Date.now() + REQUEST.budgetMs;
let step = 'starting';

/**
 * Writes the answer record and exits at once: the open socket and any pending wait must not hold
 * the exec, and nothing after a failure may run. Writes to a pipe are synchronous in Node.js on Linux.
 */
function answer(record, status) {
  const json = Buffer.from(JSON.stringify(record), 'utf8');
  process.stdout.write(Buffer.concat([Buffer.from(json.length + '\n'), json]));
  process.exit(status);
}

function fail(message) {
  answer({ ok: false, error: message }, EXIT_TOOL_ERROR);
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

main().then(
  (result) => answer({ ok: true, result }, EXIT_OK),
  (error) => fail(error.message),
);
