import { guestCode, parseAnswer } from '@berth/providers';
import type { ToolContext, ToolOutcome, ToolSpec } from './tools.js';

/*
 * Browser tools (browser_navigate, ...): each call runs the browser driver,
 * sandbox-images/guest/browser.mjs, in the agent's sandbox, which starts Chromium there when it is
 * not running yet, drives its first tab over the Chrome DevTools Protocol and answers with one
 * record. Chromium outlives the program, so the page and its state carry over from one call to the next.
 *
 * Only type imports from tools.ts: it imports this module, and a value import back would be a
 * cycle in which whichever module loads second sees the other's exports uninitialized.
 */

export type BrowserAction = 'navigate' | 'screenshot' | 'click' | 'type' | 'text';

/**
 * Time the program gives itself within the exec's limit, keeping back enough to report what it
 * was doing before the exec's timeout kills it.
 */
export function programBudgetMs(timeoutMs: number): number {
  return timeoutMs - Math.min(2_000, Math.floor(timeoutMs / 5));
}

/** The sandbox program for one call: the browser driver with its request (see guestCode). */
export function browserProgram(action: BrowserAction, args: Record<string, unknown>, timeoutMs: number): string {
  return guestCode('browser.mjs', { action, args, budgetMs: programBudgetMs(timeoutMs) });
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
  const answer = parseAnswer(run.stdout);
  if (answer?.ok === true) return { result: answer.result };
  if (answer?.ok === false) return { failure: { output: answer.error, isError: true, exitCode: run.exitCode } };
  const output = run.stderr.trim() || `the browser program gave no answer (exit code ${run.exitCode}): ${run.stdout.slice(0, 500)}`;
  return { failure: { output, isError: true, exitCode: run.exitCode } };
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
