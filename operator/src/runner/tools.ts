import type { SandboxRef } from '@berth/crds';
import { EXEC_LANGUAGES, type ExecResult, type SandboxProvider } from '@berth/common';
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

/**
 * A Python program with the tool's arguments embedded as a JSON string (a valid Python string
 * literal), so that no argument is ever spliced into code unescaped.
 */
function pythonWithArgs(args: Record<string, unknown>, body: string): string {
  return `import json, os, sys\nARGS = json.loads(${JSON.stringify(JSON.stringify(args))})\n${body}`;
}

const RESOLVE_PATH = `def resolve(path):
    return path if os.path.isabs(path) else os.path.join('/workspace', path)
`;

export function formatExecResult(result: ExecResult): string {
  const parts = [`exit code ${result.exitCode}`];
  if (result.stdout) parts.push(`stdout:\n${result.stdout}`);
  if (result.stderr) parts.push(`stderr:\n${result.stderr}`);
  return parts.join('\n');
}

async function runPython(context: ToolContext, code: string): Promise<ToolOutcome> {
  const result = await context.provider.exec(context.sandbox, { language: 'python', code, timeoutMs: context.timeoutMs });
  if (result.exitCode !== 0) return { output: result.stderr.trim() || `failed with exit code ${result.exitCode}`, isError: true, exitCode: result.exitCode };
  return { output: result.stdout, isError: false, exitCode: 0 };
}

const FILE_READ_LIMIT = 256 * 1024;

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
      runPython(
        context,
        pythonWithArgs(
          { path: stringField(input, 'path'), limit: FILE_READ_LIMIT },
          `${RESOLVE_PATH}with open(resolve(ARGS['path']), 'rb') as f:
    data = f.read(ARGS['limit'] + 1)
sys.stdout.write(data[:ARGS['limit']].decode('utf-8', 'replace'))
if len(data) > ARGS['limit']:
    sys.stdout.write('\\n[file truncated after %d bytes]' % ARGS['limit'])
`,
        ),
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
      runPython(
        context,
        pythonWithArgs(
          { path: stringField(input, 'path'), content: stringField(input, 'content') },
          `${RESOLVE_PATH}path = resolve(ARGS['path'])
os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
data = ARGS['content'].encode('utf-8')
with open(path, 'wb') as f:
    f.write(data)
print('wrote %d bytes to %s' % (len(data), path))
`,
        ),
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
      runPython(
        context,
        pythonWithArgs(
          { path: stringField(input, 'path', true) || '.', recursive: input.recursive === true, limit: 500 },
          `${RESOLVE_PATH}root = resolve(ARGS['path'])
entries = []
for directory, dirs, files in os.walk(root):
    dirs.sort()
    for name in sorted(dirs):
        entries.append(os.path.relpath(os.path.join(directory, name), root) + '/')
    for name in sorted(files):
        full = os.path.join(directory, name)
        entries.append('%s  %d bytes' % (os.path.relpath(full, root), os.path.getsize(full)))
    if not ARGS['recursive']:
        break
if not os.path.isdir(root):
    sys.exit('not a directory: %s' % root)
for entry in entries[:ARGS['limit']]:
    print(entry)
if len(entries) > ARGS['limit']:
    print('[%d more entries not shown]' % (len(entries) - ARGS['limit']))
if not entries:
    print('(empty)')
`,
        ),
      ),
  },
];

export const TOOLS: ReadonlyMap<string, ToolSpec> = new Map([...BASE_TOOLS, ...BROWSER_TOOLS].map((tool) => [tool.name, tool]));

export const TOOL_NAMES = [...TOOLS.keys()];

/** Why an agent's `tools` list is not acceptable, or undefined when it is. */
export function toolListProblem(tools: readonly string[], browser: boolean): string | undefined {
  const unknown = tools.filter((name) => !TOOLS.has(name));
  if (unknown.length > 0) return `unknown tool${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; valid tools: ${TOOL_NAMES.join(', ')}`;
  const browserOnly = tools.filter((name) => TOOLS.get(name)!.needsBrowser);
  if (browserOnly.length > 0 && !browser) return `${browserOnly.join(', ')} need${browserOnly.length > 1 ? '' : 's'} a browser agent (browser: true)`;
  return undefined;
}
