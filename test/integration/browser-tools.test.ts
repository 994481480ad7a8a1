import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxRef } from '../../crds/src/index.js';
import { loadConfig } from '../../common/src/config.js';
import { createLogger } from '../../common/src/log.js';
import { createLocalProvider, ImageStore, type LocalProvider } from '../../providers/src/local/index.js';
import { BROWSER_TOOLS } from '../../operator/src/runner/browser.js';
import type { ToolOutcome } from '../../operator/src/runner/tools.js';
import { removeDataDir } from '../helpers/runsc.js';

// The button says whether its click was a real input event (isTrusted), not a script's click().
const PAGE = `<!doctype html>
<title>Berth test page</title>
<button id="go" onclick="document.getElementById('out').textContent = event.isTrusted ? 'clicked by the mouse' : 'clicked by a script'">Go</button>
<p id="out">not clicked</p>
<form onsubmit="event.preventDefault(); document.getElementById('echo').textContent = 'echo: ' + document.getElementById('name').value">
  <input id="name" name="name">
</form>
<p id="echo"></p>
<button id="alert" onclick="alert('hello from the page')">Alert</button>
<a id="next" href="second.html">next page</a>
<div style="height: 2000px">tall content</div>
`;
const SECOND_PAGE = '<!doctype html><title>Second page</title><p>You reached the second page.</p>';

const log = createLogger({ level: 'warn', name: 'browser-tools-test' });
let dataDir: string;
let provider: LocalProvider;
let sandbox: SandboxRef;
let workspace: string;

beforeAll(async () => {
  const config = loadConfig({});
  // The global setup builds python, node and go; Chromium's image only browser agents need.
  await new ImageStore(config.imageDir, log).ensure('browser');
  dataDir = mkdtempSync(join(tmpdir(), 'berth-browser-tools-'));
  chmodSync(dataDir, 0o755);
  provider = createLocalProvider({ ...config, dataDir, browserImage: 'browser' }, log);
  const agentId = `agt_${randomBytes(6).toString('hex')}`;
  sandbox = await provider.provision({ agentId, sessionId: 'ses_browser', timeoutSeconds: 600, compute: 'python', browser: true, env: {} });
  workspace = join(dataDir, 'sandboxes', agentId, 'workspace');
  writeFileSync(join(workspace, 'page.html'), PAGE);
  writeFileSync(join(workspace, 'second.html'), SECOND_PAGE);
});

afterAll(async () => {
  if (sandbox) await provider.terminate(sandbox).catch(() => undefined);
  if (dataDir) removeDataDir(dataDir);
});

/** Runs a browser tool in the sandbox as the agent loop does; Chromium's cold start fits in the timeout. */
function call(name: string, input: Record<string, unknown> = {}): Promise<ToolOutcome> {
  const tool = BROWSER_TOOLS.find((candidate) => candidate.name === name);
  if (!tool) throw new Error(`no tool ${name}`);
  return tool.run(input, { provider, sandbox, timeoutMs: 60_000 });
}

async function succeeds(name: string, input: Record<string, unknown> = {}): Promise<string> {
  const outcome = await call(name, input);
  expect(outcome.isError, outcome.output).toBe(false);
  return outcome.output;
}

/** A PNG's signature, and its size from the IHDR chunk. */
function pngSize(file: string): { width: number; height: number } {
  const png = readFileSync(file);
  expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

// One page through the whole file: each test starts where the one before it left the tab.
describe('browser tools in a gVisor sandbox', () => {
  it('open a page from the workspace and answer with its title', async () => {
    const output = await succeeds('browser_navigate', { url: 'file:///workspace/page.html' });
    expect(output).toContain('Opened file:///workspace/page.html');
    expect(output).toContain('Title: "Berth test page"');
  });

  it('click a button with real mouse events', async () => {
    expect(await succeeds('browser_text', { selector: '#out' })).toMatch(/\n\nnot clicked$/);
    expect(await succeeds('browser_click', { selector: '#go' })).toContain('Clicked <button#go> "Go"');
    expect(await succeeds('browser_text', { selector: '#out' })).toMatch(/\n\nclicked by the mouse$/);
  });

  it('type into an input and submit it with Enter', async () => {
    const name = `Grace "Amazing" O'Hopper \`$(id)\` \${x}`;
    const output = await succeeds('browser_type', { selector: '#name', text: name, submit: true });
    expect(output).toContain(', then pressed Enter');
    expect(output).toContain(`Its value after typing: ${JSON.stringify(name)}`);
    const page = await succeeds('browser_text');
    expect(page).toContain('URL: file:///workspace/page.html\nTitle: "Berth test page"');
    expect(page).toContain(`echo: ${name}`);
  });

  it('save screenshots of the view and of the whole page into the workspace', async () => {
    const output = await succeeds('browser_screenshot', { path: 'shots/page.png', fullPage: true });
    expect(output).toMatch(/^Saved \/workspace\/shots\/page\.png: \d+x\d+ pixels, \d+ bytes \(PNG\)/);
    const full = pngSize(join(workspace, 'shots', 'page.png'));
    expect(full.width).toBeGreaterThan(1200);
    expect(full.height).toBeGreaterThan(2000);

    await succeeds('browser_screenshot');
    const [view] = readdirSync(workspace).filter((file) => /^screenshot-.*\.png$/.test(file));
    expect(view).toBeDefined();
    const size = pngSize(join(workspace, view!));
    expect(size.width).toBeGreaterThan(1200);
    expect(size.height).toBeGreaterThan(400);
    expect(size.height).toBeLessThan(full.height);
  });

  it('accept a dialog the click opens, and say so', async () => {
    expect(await succeeds('browser_click', { selector: '#alert' })).toContain('The page opened a dialog (alert) saying "hello from the page"');
  });

  it('follow a link to the page it opens', async () => {
    expect(await succeeds('browser_click', { selector: '#next' })).toContain('Page: file:///workspace/second.html (title: "Second page")');
    expect(await succeeds('browser_text')).toContain('You reached the second page.');
  });

  it('fail clearly on a selector that matches nothing', async () => {
    const outcome = await call('browser_click', { selector: '#missing' });
    expect(outcome).toMatchObject({ isError: true, exitCode: 1 });
    expect(outcome.output).toBe('no element matches the CSS selector "#missing" on file:///workspace/second.html');
  });
});
