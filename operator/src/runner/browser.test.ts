import type { SandboxRef } from '@berth/crds';
import type { ExecRequest, ExecResult, SandboxProvider } from '@berth/common';
import { describe, expect, it } from 'vitest';
import { BROWSER_TOOLS, browserProgram, defaultScreenshotPath, programBudgetMs } from './browser.js';
import type { ToolContext } from './tools.js';

/** A provider whose sandbox answers every exec with `answer`, keeping the requests it got. */
function recordingContext(answer: Partial<ExecResult> = {}) {
  const requests: ExecRequest[] = [];
  const unused = () => Promise.reject(new Error('not used by tools'));
  const provider: SandboxProvider = {
    name: 'recording',
    capabilities: { computes: ['python'], browser: true, gpuTypes: [], storage: false, checkpoint: 'none' },
    provision: unused,
    state: unused,
    terminate: unused,
    checkpoint: unused,
    exec: async (_ref, request) => {
      requests.push(request);
      return { stdout: '', stderr: '', exitCode: 0, durationMs: 1, ...answer };
    },
  };
  const sandbox: SandboxRef = { provider: 'recording', id: 'agt_test' };
  const context: ToolContext = { provider, sandbox, timeoutMs: 30_000 };
  return { context, requests };
}

function tool(name: string) {
  const found = BROWSER_TOOLS.find((candidate) => candidate.name === name);
  if (!found) throw new Error(`no tool ${name}`);
  return found;
}

/** The request a generated program carries, evaluated from its first line as Node would. */
function embeddedRequest(program: string): unknown {
  const firstLine = program.slice(0, program.indexOf('\n'));
  const scope: { BERTH_REQUEST?: string } = {};
  new Function('globalThis', firstLine)(scope);
  return JSON.parse(scope.BERTH_REQUEST!);
}

const record = (value: unknown) => {
  const json = JSON.stringify(value);
  return `${Buffer.byteLength(json)}\n${json}`;
};
const answer = (result: Record<string, unknown>) => ({ stdout: record({ ok: true, result }) });
const page = { url: 'file:///workspace/page.html', title: 'Test page' };

describe('BROWSER_TOOLS', () => {
  it('are the five browser tools, each needing a browser agent, with closed input schemas', () => {
    expect(BROWSER_TOOLS.map((spec) => spec.name)).toEqual([
      'browser_navigate',
      'browser_screenshot',
      'browser_click',
      'browser_type',
      'browser_text',
    ]);
    for (const spec of BROWSER_TOOLS) {
      expect(spec.needsBrowser, spec.name).toBe(true);
      expect(spec.inputSchema, spec.name).toMatchObject({ type: 'object', additionalProperties: false });
      const { properties, required } = spec.inputSchema as { properties: Record<string, unknown>; required: string[] };
      for (const name of required) expect(properties, `${spec.name} requires ${name}`).toHaveProperty(name);
    }
  });
});

describe('browserProgram', () => {
  it('carries arguments as data, whatever characters they hold', () => {
    const tricky = 'a "quote", a \'quote\', `tick` ${x} \\ back\nslash */ </script> \u2028 ü🌍';
    const program = browserProgram('type', { selector: tricky, text: tricky, submit: true }, 30_000);
    expect(embeddedRequest(program)).toEqual({ action: 'type', args: { selector: tricky, text: tricky, submit: true }, budgetMs: 28_000 });
  });

  it('is a program JavaScript can parse', () => {
    // Function parses without running; the module's imports are the only syntax it does not take.
    const body = browserProgram('text', {}, 30_000).replace(/^import .*;$/gm, '');
    expect(() => new Function(`'use strict';\n${body}`)).not.toThrow();
    expect(body).toContain('globalThis.BERTH_REQUEST ?? process.argv[2]');
  });

  it('keeps back time to report what it was doing before the exec limit', () => {
    expect(programBudgetMs(120_000)).toBe(118_000);
    expect(programBudgetMs(3_000)).toBe(2_400);
  });
});

describe('a browser tool call', () => {
  it('runs one TypeScript program with the tool timeout and answers with text for the model', async () => {
    const { context, requests } = recordingContext(answer({ ...page, url: 'https://example.com/final', status: 200, complete: true }));
    const outcome = await tool('browser_navigate').run({ url: 'https://example.com/' }, context);
    expect(outcome).toEqual({ output: 'Opened https://example.com/final (HTTP 200)\nTitle: "Test page"', isError: false, exitCode: 0 });
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({ language: 'typescript', timeoutMs: 30_000 });
    expect(embeddedRequest(requests[0]!.code)).toMatchObject({ action: 'navigate', args: { url: 'https://example.com/' } });
  });

  it('says when the page had not loaded in time', async () => {
    const { context } = recordingContext(answer({ ...page, complete: false }));
    const outcome = await tool('browser_navigate').run({ url: page.url }, context);
    expect(outcome.output).toBe(`Opened ${page.url}\nTitle: "Test page"\nThe page had not finished loading when time ran out; it may still be incomplete.`);
  });

  it("answers the program's failure record with its message as an error", async () => {
    const error = 'no element matches the CSS selector "#missing" on file:///workspace/page.html';
    const { context } = recordingContext({ stdout: record({ ok: false, error }), stderr: 'a warning\n', exitCode: 1 });
    expect(await tool('browser_click').run({ selector: '#missing' }, context)).toEqual({ output: error, isError: true, exitCode: 1 });
  });

  it('answers a program that crashed, or gave no record, with its stderr or what it printed', async () => {
    const crashed = recordingContext({ stderr: 'SyntaxError: boom\n', exitCode: 1 });
    expect(await tool('browser_text').run({}, crashed.context)).toEqual({ output: 'SyntaxError: boom', isError: true, exitCode: 1 });
    const { context } = recordingContext({ stdout: '{"url": "looks like a result, without its length"}\n' });
    const outcome = await tool('browser_text').run({}, context);
    expect(outcome.isError).toBe(true);
    expect(outcome.output).toContain('gave no answer');
  });

  it.each([
    ['browser_navigate', { url: 'example.com' }, '"url" must be an absolute URL with a scheme, such as https://example.com'],
    ['browser_navigate', {}, '"url" must be a non-empty string'],
    ['browser_click', { selector: '' }, '"selector" must be a non-empty string'],
    ['browser_type', { selector: 'input', text: 42 }, '"text" must be a string'],
    ['browser_type', { selector: 'input', text: 'x', submit: 'yes' }, '"submit" must be true or false'],
    ['browser_screenshot', { fullPage: 1 }, '"fullPage" must be true or false'],
    ['browser_text', { selector: 7 }, '"selector" must be a non-empty string'],
  ])('answers %s %j with an input error and runs nothing', async (name, input, message) => {
    const { context, requests } = recordingContext();
    expect(await tool(name).run(input, context)).toEqual({ output: `invalid input: ${message}`, isError: true });
    expect(requests).toEqual([]);
  });

  it('names a default screenshot file after the time', async () => {
    expect(defaultScreenshotPath(new Date('2025-05-01T10:20:30.123Z'))).toBe('screenshot-2025-05-01T10-20-30-123Z.png');
    const { context, requests } = recordingContext(answer({ ...page, path: '/workspace/x.png', width: 1280, height: 657, bytes: 1000, cut: false }));
    const outcome = await tool('browser_screenshot').run({}, context);
    expect(outcome.output).toBe(`Saved /workspace/x.png: 1280x657 pixels, 1000 bytes (PNG)\nPage: ${page.url} (title: "Test page")`);
    expect(embeddedRequest(requests[0]!.code)).toMatchObject({ args: { path: expect.stringMatching(/^screenshot-[0-9T-]+Z\.png$/), fullPage: false } });
  });

  it('tells the model about dialogs it accepted and a blocked page it left', async () => {
    const dialogs = [{ type: 'alert', message: 'Saved!' }];
    const { context } = recordingContext(answer({ ...page, element: '<button#save>', label: 'Save', matches: 2, dialogs }));
    expect((await tool('browser_click').run({ selector: 'button' }, context)).output).toBe(
      [
        'Clicked <button#save> "Save" (the first of 2 matches)',
        `Page: ${page.url} (title: "Test page")`,
        'The page opened a dialog (alert) saying "Saved!"; it was accepted with OK.',
      ].join('\n'),
    );

    const blocked = recordingContext(answer({ ...page, status: 200, complete: true, leftBlockedPage: true }));
    expect((await tool('browser_navigate').run({ url: page.url }, blocked.context)).output).toMatch(/^The previous page did not respond/);
  });

  it('says how much of a long text it shows', async () => {
    const { context } = recordingContext(answer({ ...page, text: 'abc', length: 50_000 }));
    const outcome = await tool('browser_text').run({}, context);
    expect(outcome.output).toBe(
      `URL: ${page.url}\nTitle: "Test page"\n\nabc\n\n[text cut: showing 3 of 50000 characters; pass a selector to read a part of the page]`,
    );
  });

  it('reports the typed value, and Enter when it pressed it', async () => {
    const { context } = recordingContext(answer({ ...page, element: '<input#name>', matches: 1, value: 'Ada' }));
    const outcome = await tool('browser_type').run({ selector: '#name', text: 'Ada', submit: true }, context);
    expect(outcome.output).toBe(`Typed 3 characters into <input#name>, then pressed Enter\nIts value after typing: "Ada"\nPage: ${page.url} (title: "Test page")`);
  });
});
