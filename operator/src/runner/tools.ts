import type { SandboxRef } from '@berth/crds';
import { EXEC_LANGUAGES, type ExecResult, type SandboxProvider } from '@berth/common';
import { guestCode, parseAnswer } from '@berth/providers';
import { BROWSER_TOOLS } from './browser.js';
import type { ToolDefinition } from './models/types.js';

/** Where a tool runs: the agent's sandbox, through its provider. */
export interface ToolContext {
  provider: SandboxProvider;
  sandbox: SandboxRef;
  /** Limit of each program a tool runs in the sandbox. */
  timeoutMs: number;
}

/** What a tool call gives back: the text the model reads, and details for the stream. */
export interface ToolOutcome {
  output: string;
  isError: boolean;
  exitCode?: number;
}

export interface ToolSpec extends ToolDefinition {
  /** Browser tools need an agent with `browser: true`. */
  needsBrowser: boolean;
  run(input: Record<string, unknown>, context: ToolContext): Promise<ToolOutcome>;
}

/** Tool output the model reads is cut here, with a marker saying how much it did not see. */
export const TOOL_OUTPUT_LIMIT = 16 * 1024;

export function limitToolOutput(text: string): string {
  if (text.length <= TOOL_OUTPUT_LIMIT) return text;
  return `${text.slice(0, TOOL_OUTPUT_LIMIT)}\n[output truncated: ${text.length - TOOL_OUTPUT_LIMIT} more characters not shown]`;
}

export class ToolInputError extends Error {
  override name = 'ToolInputError';
}

function stringField(input: Record<string, unknown>, name: string, optional = false): string {
  const value = input[name];
  if (value === undefined && optional) return '';
  if (typeof value !== 'string') throw new ToolInputError(`"${name}" must be a string`);
  return value;
}

export function formatExecResult(result: ExecResult): string {
  const parts = [`exit code ${result.exitCode}`];
  if (result.stdout) parts.push(`stdout:\n${result.stdout}`);
  if (result.stderr) parts.push(`stderr:\n${result.stderr}`);
  return parts.join('\n');
}

/**
 * Runs one action of the guest file tools (sandbox-images/guest/files.py) in the sandbox: its
 * result, or a tool failure whose text the model reads.
 */
export async function runFileAction<Result>(
  context: Pick<ToolContext, 'provider' | 'sandbox' | 'timeoutMs'>,
  action: string,
  args: Record<string, unknown>,
): Promise<{ result: Result } | { failure: ToolOutcome }> {
  const code = guestCode('files.py', { action, args });
  const run = await context.provider.exec(context.sandbox, { language: 'python', code, timeoutMs: context.timeoutMs });
  const answer = parseAnswer(run.stdout);
  if (answer?.ok === true) return { result: answer.result as Result };
  const output = answer?.error ?? (run.stderr.trim() || `failed with exit code ${run.exitCode}`);
  return { failure: { output, isError: true, exitCode: run.exitCode } };
}

async function fileTool<Result>(
  context: ToolContext,
  action: string,
  args: Record<string, unknown>,
  describe: (result: Result) => string,
): Promise<ToolOutcome> {
  const answer = await runFileAction<Result>(context, action, args);
  if ('failure' in answer) return answer.failure;
  return { output: describe(answer.result), isError: false, exitCode: 0 };
}

const FILE_READ_LIMIT = 256 * 1024;

/** list_files' answer: one line per entry, as `ls`-like text. */
export function describeListing(result: { entries: { path: string; bytes?: number | null }[]; more: number }): string {
  const lines = result.entries.map((entry) => (entry.path.endsWith('/') ? entry.path : `${entry.path}  ${entry.bytes ?? '?'} bytes`));
  if (result.more > 0) lines.push(`[${result.more} more entries not shown]`);
  if (lines.length === 0) lines.push('(empty)');
  return `${lines.join('\n')}\n`;
}

const BASE_TOOLS: ToolSpec[] = [
  {
    name: 'exec',
    description:
      'Run a program in your sandbox and get its stdout, stderr and exit code. The working directory is /workspace, where files persist between calls.',
    inputSchema: {
      type: 'object',
      properties: {
        language: { type: 'string', enum: [...EXEC_LANGUAGES], description: 'python (3), typescript (Node.js 24) or bash' },
        code: { type: 'string', description: 'the program' },
      },
      required: ['language', 'code'],
      additionalProperties: false,
    },
    needsBrowser: false,
    async run(input, context) {
      const language = stringField(input, 'language');
      if (!(EXEC_LANGUAGES as readonly string[]).includes(language)) {
        throw new ToolInputError(`"language" must be one of ${EXEC_LANGUAGES.join(', ')}`);
      }
      const result = await context.provider.exec(context.sandbox, {
        language: language as (typeof EXEC_LANGUAGES)[number],
        code: stringField(input, 'code'),
        timeoutMs: context.timeoutMs,
      });
      return { output: formatExecResult(result), isError: result.exitCode !== 0, exitCode: result.exitCode };
    },
  },
  {
    name: 'read_file',
    description: 'Read a text file from your sandbox. Relative paths are under /workspace.',
    inputSchema: {
      type: 'object',
      properties: { path: { type: 'string', description: 'file path, absolute or relative to /workspace' } },
      required: ['path'],
      additionalProperties: false,
    },
    needsBrowser: false,
    run: (input, context) =>
      fileTool<{ text: string; truncated: boolean; limit: number }>(
        context,
        'read_file',
        { path: stringField(input, 'path'), limit: FILE_READ_LIMIT },
        (result) => result.text + (result.truncated ? `\n[file truncated after ${result.limit} bytes]` : ''),
      ),
  },
  {
    name: 'write_file',
    description: 'Write a text file in your sandbox, creating its directories. Relative paths are under /workspace.',
    inputSchema: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'file path, absolute or relative to /workspace' },
        content: { type: 'string', description: 'the whole new content of the file' },
      },
      required: ['path', 'content'],
      additionalProperties: false,
    },
    needsBrowser: false,
    run: (input, context) =>
      fileTool<{ path: string; bytes: number }>(
        context,
        'write_file',
        { path: stringField(input, 'path'), content: stringField(input, 'content') },
        (result) => `wrote ${result.bytes} bytes to ${result.path}\n`,
      ),
  },
  {
    name: 'list_files',
    description: 'List files in a directory of your sandbox (default /workspace), with sizes; recursive on request.',
    inputSchema: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'directory, absolute or relative to /workspace' },
        recursive: { type: 'boolean', description: 'include subdirectories' },
      },
      additionalProperties: false,
    },
    needsBrowser: false,
    run: (input, context) =>
      fileTool<{ entries: { path: string; bytes?: number | null }[]; more: number }>(
        context,
        'list_files',
        { path: stringField(input, 'path', true) || '.', recursive: input.recursive === true, limit: 500 },
        describeListing,
      ),
  },
];

export const TOOLS: ReadonlyMap<string, ToolSpec> = new Map([...BASE_TOOLS, ...BROWSER_TOOLS].map((tool) => [tool.name, tool]));
