import { createReadStream, createWriteStream, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { Berth, BerthApiError, BerthError, type AgentEvent, type AgentHandle, type CreateAgentBody, type ExecLanguage, type Terminal, type WebSocketConstructor, type api } from '@berth/sdk';
import WebSocket from 'ws';
import { resolveConnection, writeConfig } from './config.js';
import { UsageError, statusText, styleFor, table, type Streams } from './output.js';

const LANGUAGES: readonly ExecLanguage[] = ['python', 'typescript', 'bash'];
const CONNECTION_OPTIONS = { url: { type: 'string' }, key: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const;

function parse<O extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: O) {
  return parseArgs({ args, options: { ...CONNECTION_OPTIONS, ...options }, allowPositionals: true, strict: true });
}

interface Context extends Streams {
  stdin: NodeJS.ReadStream;
  json: boolean;
  berth(): Berth;
}

function context(io: Streams & { stdin: NodeJS.ReadStream }, values: { url?: string | undefined; key?: string | undefined; json?: boolean | undefined }): Context {
  return {
    ...io,
    json: values.json === true,
    berth: () => {
      const connection = resolveConnection(values, io.env);
      return new Berth({ url: connection.url, apiKey: connection.apiKey });
    },
  };
}

function print(ctx: Context, text: string): void {
  ctx.stdout.write(`${text}\n`);
}

function printJson(ctx: Context, value: unknown): void {
  ctx.stdout.write(`${JSON.stringify(value)}\n`);
}

/** How long `berth run` stays silent off a terminal before it says it is still working. */
const QUIET_NOTE_MS = 30_000;

const durationPattern = /^([0-9]+h)?([0-9]+m)?([0-9]+s)?$/;

/** `berth agents …` */
async function agentsCommand(args: string[], io: Streams & { stdin: NodeJS.ReadStream }): Promise<number> {
  const [action, ...rest] = args;
  switch (action) {
    case 'create': {
      const { values, positionals } = parse(rest, {
        session: { type: 'string' },
        user: { type: 'string' },
        compute: { type: 'string' },
        timeout: { type: 'string' },
        model: { type: 'string' },
        instructions: { type: 'string' },
        definition: { type: 'string' },
        'no-wait': { type: 'boolean' },
      });
      if (positionals.length > 0) throw new UsageError(`berth agents create takes no arguments (got ${positionals.join(' ')})`);
      if (!values.session === !values.user) throw new UsageError('berth agents create needs --session <ses_…> or --user <user id> (one of them)');
      if (values.timeout !== undefined && !durationPattern.test(values.timeout)) throw new UsageError('--timeout is a duration such as 30s, 15m or 2h');
      const ctx = context(io, values);
      const berth = ctx.berth();
      const sessionId = values.session ?? (await berth.sessions.forUser(values.user!)).id;
      const body: CreateAgentBody = {
        ...(values.compute ? { compute: values.compute as CreateAgentBody['compute'] } : {}),
        ...(values.timeout ? { timeout: values.timeout } : {}),
        ...(values.model ? { model: values.model } : {}),
        ...(values.instructions ? { instructions: values.instructions } : {}),
        ...(values.definition ? { definition: values.definition } : {}),
      };
      const agent = await berth.agents.create(sessionId, body, { waitUntilReady: !values['no-wait'] });
      if (ctx.json) printJson(ctx, agent.data);
      else print(ctx, `${agent.id}  ${statusText(agent.status, styleFor(ctx.stdout, ctx.env))}  session ${agent.data.sessionId}`);
      return 0;
    }
    case 'list': {
      const { values, positionals } = parse(rest, { session: { type: 'string' }, status: { type: 'string' }, limit: { type: 'string' }, all: { type: 'boolean' } });
      if (positionals.length > 0) throw new UsageError(`berth agents list takes no arguments (got ${positionals.join(' ')})`);
      if (values.limit !== undefined && !/^[0-9]{1,3}$/.test(values.limit)) throw new UsageError('--limit is a number from 1 to 100');
      const ctx = context(io, values);
      const query = { ...(values.session ? { sessionId: values.session } : {}), ...(values.status ? { status: values.status } : {}), ...(values.limit ? { limit: values.limit } : {}) };
      const agents: api.Agent[] = [];
      let hasMore = false;
      if (values.all) for await (const agent of ctx.berth().agents.all(query)) agents.push(agent);
      else {
        const page = await ctx.berth().agents.list(query);
        agents.push(...page.data);
        hasMore = page.hasMore;
      }
      if (ctx.json) {
        printJson(ctx, agents);
        return 0;
      }
      const style = styleFor(ctx.stdout, ctx.env);
      print(ctx, table(['ID', 'STATUS', 'COMPUTE', 'SESSION', 'CREATED'], agents.map((agent) => [agent.id, agent.status, agent.compute ?? '', agent.sessionId, String(agent.createdAt ?? '')]), style));
      if (hasMore) ctx.stderr.write(`${style.dim('more agents: --all lists every one, --limit sets the page size')}\n`);
      return 0;
    }
    case 'get': {
      const { values, positionals } = parse(rest, {});
      const ctx = context(io, values);
      const agent = await ctx.berth().agents.get(oneId(positionals, 'get'));
      if (ctx.json) printJson(ctx, agent.data);
      else print(ctx, `${agent.id}  ${statusText(agent.status, styleFor(ctx.stdout, ctx.env))}  session ${agent.data.sessionId}`);
      return 0;
    }
    case 'exec':
      return execCommand(rest, io);
    case 'shell':
      return shellCommand(rest, io);
    case 'files':
      return filesCommand(rest, io);
    case 'pause':
    case 'resume':
    case 'terminate': {
      const { values, positionals } = parse(rest, { 'no-wait': { type: 'boolean' } });
      const ctx = context(io, values);
      const agent = ctx.berth().agents.handle(oneId(positionals, action));
      if (action === 'terminate') {
        await agent.terminate();
        if (ctx.json) printJson(ctx, { ok: true, id: agent.id });
        else print(ctx, `${agent.id}  ${statusText('terminated', styleFor(ctx.stdout, ctx.env))}`);
        return 0;
      }
      await agent[action]();
      // A pause lands once the current tool call is done, a resume once the sandbox is restored.
      if (!values['no-wait']) await agent.waitFor(action === 'pause' ? ['paused'] : ['idle', 'running']);
      if (ctx.json) printJson(ctx, agent.data);
      else print(ctx, `${agent.id}  ${statusText(agent.status, styleFor(ctx.stdout, ctx.env))}`);
      return 0;
    }
    default:
      throw new UsageError('usage: berth agents create|list|get|exec|shell|files|pause|resume|terminate …; see berth agents --help');
  }
}

function oneId(positionals: string[], action: string): string {
  if (positionals.length !== 1) throw new UsageError(`usage: berth agents ${action} <agent id>`);
  return positionals[0]!;
}

const FILES_USAGE =
  'usage: berth agents files <agent id> ls [path] [--json] | get <path> [local file|-] | put <local file|-> <path> [--parents] [--mode 644] | rm <path> [--recursive] | mkdir <path> [--parents]';

/** The size column of `files ls`: bytes, KiB, MiB, GiB. */
function sizeText(bytes: number): string {
  const units = ['B', 'K', 'M', 'G', 'T'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value}` : `${value < 10 ? value.toFixed(1) : Math.round(value)}${units[unit]}`;
}

/**
 * `berth agents files <id> ls|get|put|rm|mkdir …`: a sandbox's files. `get` and `put` stream: a
 * file of any size passes through without being held, to or from a local file or stdout / stdin (`-`).
 */
async function filesCommand(args: string[], io: Streams & { stdin: NodeJS.ReadStream }): Promise<number> {
  const { values, positionals } = parse(args, {
    parents: { type: 'boolean', short: 'p' },
    recursive: { type: 'boolean', short: 'r' },
    mode: { type: 'string' },
  });
  const [agentId, action, ...paths] = positionals;
  if (!agentId || !action) throw new UsageError(FILES_USAGE);
  const arity: Record<string, [min: number, max: number]> = { ls: [0, 1], get: [1, 2], put: [2, 2], rm: [1, 1], mkdir: [1, 1] };
  const allowed = arity[action];
  if (!allowed || paths.length < allowed[0] || paths.length > allowed[1]) throw new UsageError(FILES_USAGE);
  // Every flag belongs to some of the actions: one given where it means nothing is refused, not ignored.
  const flagsOf: Record<string, string[]> = { ls: [], get: [], put: ['parents', 'mode'], rm: ['recursive'], mkdir: ['parents'] };
  for (const flag of ['parents', 'recursive', 'mode'] as const) {
    if (values[flag] !== undefined && !flagsOf[action]!.includes(flag)) throw new UsageError(`--${flag} is not an option of berth agents files ${action}`);
  }
  if (values.mode !== undefined && !/^[0-7]{3,4}$/.test(values.mode)) throw new UsageError('--mode is octal permission bits, e.g. 644');
  const ctx = context(io, values);
  const files = ctx.berth().agents.handle(agentId).files;
  switch (action) {
    case 'ls': {
      const listing = await files.list(paths[0]);
      if (ctx.json) {
        printJson(ctx, listing);
        return 0;
      }
      const style = styleFor(ctx.stdout, ctx.env);
      const name = (entry: (typeof listing.data)[number]) =>
        entry.type === 'directory' ? style.cyan(`${entry.name}/`) : entry.type === 'symlink' ? `${entry.name} -> ${entry.target ?? ''}` : entry.name;
      print(ctx, table(['MODE', 'SIZE', 'MODIFIED', 'NAME'], listing.data.map((entry) => [entry.mode.toString(8).padStart(4, '0'), sizeText(entry.size), entry.modifiedAt, name(entry)]), style));
      if (listing.omitted > 0) ctx.stderr.write(`${style.dim(`${listing.omitted} more entries not listed`)}
`);
      return 0;
    }
    case 'get': {
      const [remote, local = '-'] = paths as [string, string?];
      const body = Readable.fromWeb((await files.read(remote)) as import('node:stream/web').ReadableStream<Uint8Array>);
      if (local === '-') {
        for await (const chunk of body) if (!ctx.stdout.write(chunk)) await once(ctx.stdout, 'drain');
        return 0;
      }
      // Written beside the local file and renamed at the end: a download cut short leaves the old file.
      const partial = `${local}.berth-partial`;
      try {
        await pipeline(body, createWriteStream(partial));
        renameSync(partial, local);
      } catch (error) {
        rmSync(partial, { force: true });
        throw error;
      }
      if (ctx.json) printJson(ctx, { path: remote, file: local, size: statSync(local).size });
      return 0;
    }
    case 'put': {
      const [local, remote] = paths as [string, string];
      if (local !== '-') {
        const stat = (() => {
          try {
            return statSync(local);
          } catch {
            throw new UsageError(`no local file ${local}`);
          }
        })();
        if (!stat.isFile()) throw new UsageError(`${local} is not a file`);
      }
      const data = local === '-' ? ctx.stdin : createReadStream(local);
      const written = await files.write(remote, data, { ...(values.parents ? { parents: true } : {}), ...(values.mode ? { mode: values.mode } : {}) });
      if (ctx.json) printJson(ctx, written);
      else print(ctx, `${written.path}  ${sizeText(written.size)}`);
      return 0;
    }
    case 'rm': {
      await files.remove(paths[0]!, values.recursive ? { recursive: true } : {});
      if (ctx.json) printJson(ctx, { ok: true, path: paths[0] });
      return 0;
    }
    default: {
      const made = await files.mkdir(paths[0]!, values.parents ? { parents: true } : {});
      if (ctx.json) printJson(ctx, made);
      else print(ctx, made.path);
      return 0;
    }
  }
}

/** `berth agents exec <id> [--language bash] [--] <code…>`: the output as it comes, the program's exit code. */
async function execCommand(args: string[], io: Streams & { stdin: NodeJS.ReadStream }): Promise<number> {
  const { values, positionals } = parse(args, {
    language: { type: 'string', short: 'l' },
    env: { type: 'string', short: 'e', multiple: true },
    cwd: { type: 'string' },
    timeout: { type: 'string' },
    stdin: { type: 'string' },
    background: { type: 'boolean' },
  });
  const [agentId, ...code] = positionals;
  if (!agentId || code.length === 0) throw new UsageError('usage: berth agents exec <agent id> [--language python|typescript|bash] [--env K=V] [--cwd dir] [--timeout s] [--stdin file|-] [--] <code> (code - reads it from stdin)');
  const language = (values.language ?? 'bash') as ExecLanguage;
  if (!LANGUAGES.includes(language)) throw new UsageError(`--language is one of ${LANGUAGES.join(', ')}`);
  const env: Record<string, string> = {};
  for (const pair of values.env ?? []) {
    const equals = pair.indexOf('=');
    if (equals <= 0) throw new UsageError(`--env takes NAME=value (got ${pair})`);
    env[pair.slice(0, equals)] = pair.slice(equals + 1);
  }
  if (values.timeout !== undefined && !/^[0-9]{1,6}$/.test(values.timeout)) throw new UsageError('--timeout is whole seconds');
  if (code.join(' ') === '-' && values.stdin === '-') throw new UsageError('code and --stdin cannot both be read from stdin');
  const body = {
    language,
    code: code.join(' ') === '-' ? readFileSync(0, 'utf8') : code.join(' '),
    ...(Object.keys(env).length ? { env } : {}),
    ...(values.cwd ? { cwd: values.cwd } : {}),
    ...(values.timeout ? { timeout: Number(values.timeout) } : {}),
    ...(values.stdin !== undefined ? { stdin: readFileSync(values.stdin === '-' ? 0 : values.stdin, 'utf8') } : {}),
  };
  const ctx = context(io, values);
  const agent = ctx.berth().agents.handle(agentId);
  if (values.background) {
    const process = await agent.exec.background(body);
    if (ctx.json) printJson(ctx, process.data);
    else print(ctx, `started pid ${process.pid}: berth agents exec ${agentId} … --background; output with GET /v1/agents/${agentId}/processes/${process.pid}/logs`);
    return 0;
  }
  if (ctx.json) {
    // The API's result as it is: stdout, stderr, exitCode, durationMs.
    const result = await agent.exec(body);
    printJson(ctx, result);
    return result.exitCode === 0 ? 0 : 1;
  }
  const abort = new AbortController();
  const onSignal = () => abort.abort(new UsageError('interrupted'));
  process.once('SIGINT', onSignal);
  try {
    for await (const chunk of agent.exec.stream(body, { signal: abort.signal })) {
      if (chunk.type === 'stdout') ctx.stdout.write(chunk.data);
      else if (chunk.type === 'stderr') ctx.stderr.write(chunk.data);
      else if (chunk.type === 'exit') return Math.min(chunk.exitCode, 255);
    }
    return 1;
  } finally {
    process.off('SIGINT', onSignal);
  }
}

/** `berth agents shell <id> [--cwd dir] [-- program args…]`: this terminal wired to one in the sandbox. */
async function shellCommand(args: string[], io: Streams & { stdin: NodeJS.ReadStream }): Promise<number> {
  const { values, positionals } = parse(args, { cwd: { type: 'string' } });
  const [agentId, ...argv] = positionals;
  if (!agentId) throw new UsageError('usage: berth agents shell <agent id> [--cwd dir] [-- program args…] (default bash)');
  const ctx = context(io, values);
  const agent: AgentHandle = ctx.berth().agents.handle(agentId);
  const size = () => ({ rows: io.stdout.rows || 24, cols: io.stdout.columns || 80 });
  const terminal: Terminal = await agent.terminal({
    ...(argv.length ? { argv } : {}),
    ...(values.cwd ? { cwd: values.cwd } : {}),
    ...size(),
    WebSocket: WebSocket as unknown as WebSocketConstructor,
    onData: (data) => io.stdout.write(data),
  });
  const raw = io.stdin.isTTY === true;
  if (raw) io.stdin.setRawMode(true);
  const onInput = (data: Buffer) => terminal.write(data);
  const onResize = () => {
    const { rows, cols } = size();
    terminal.resize(rows, cols);
  };
  io.stdin.on('data', onInput);
  io.stdin.resume();
  process.on('SIGWINCH', onResize);
  try {
    const { exitCode } = await terminal.exit;
    return Math.min(exitCode, 255);
  } finally {
    process.off('SIGWINCH', onResize);
    io.stdin.off('data', onInput);
    if (raw) io.stdin.setRawMode(false);
    io.stdin.pause();
    terminal.close();
  }
}

/** How one event of a run is shown to a person. */
function describeEvent(event: AgentEvent, style: ReturnType<typeof styleFor>): string | undefined {
  const data = event.data as Record<string, any>;
  switch (event.event) {
    case 'thinking':
      return style.dim(String(data.text ?? ''));
    case 'tool_call':
      return `${style.cyan('▸')} ${style.bold(String(data.tool))} ${JSON.stringify(data.input ?? {}).slice(0, 200)}`;
    case 'tool_result': {
      const mark = data.isError ? style.red('✗') : style.green('✓');
      const exit = data.exitCode === null || data.exitCode === undefined ? '' : ` exit ${data.exitCode}`;
      const output = String(data.output ?? '').trimEnd();
      return `${mark} ${data.tool}${exit} ${style.dim(`${data.durationMs ?? 0} ms`)}${output ? `\n${style.dim(output.split('\n').slice(-10).join('\n'))}` : ''}`;
    }
    case 'output': {
      const cost = data.cost as { amount: number; currency: string } | undefined;
      return `${String(data.text ?? '')}${cost ? `\n${style.dim(`cost ${(cost.amount / 100).toFixed(2)} ${cost.currency.toUpperCase()}`)}` : ''}`;
    }
    case 'error':
      return style.red(`error ${data.code}: ${data.message}`);
    case 'guardrail':
      return style.yellow(`guardrail ${data.rule}: ${data.action}`);
    default:
      return event.event.startsWith('approval.') ? style.yellow(`${event.event} ${data.tool ?? ''} ${data.approvalId ?? ''}`.trim()) : undefined;
  }
}

/**
 * `berth run "<task>"`: the task on an agent (a given one, or a new one that is terminated at the
 * end), following its stream; a spinner with the time spent while nothing arrives, on a terminal.
 */
async function runCommand(args: string[], io: Streams & { stdin: NodeJS.ReadStream }): Promise<number> {
  const { values, positionals } = parse(args, {
    agent: { type: 'string' },
    session: { type: 'string' },
    user: { type: 'string' },
    compute: { type: 'string' },
    model: { type: 'string' },
    timeout: { type: 'string' },
    keep: { type: 'boolean' },
  });
  if (positionals.length !== 1 || !positionals[0]) throw new UsageError('usage: berth run "<task>" [--agent agt_… | --session ses_… | --user id] [--model m] [--keep] [--json]');
  if (values.agent && (values.session || values.user || values.compute || values.model || values.timeout || values.keep)) {
    throw new UsageError('--agent runs on an existing agent: --session, --user, --compute, --model, --timeout and --keep are for a new one');
  }
  if (values.timeout !== undefined && !durationPattern.test(values.timeout)) throw new UsageError('--timeout is a duration such as 30s, 15m or 2h');
  const ctx = context(io, values);
  const berth = ctx.berth();
  const style = styleFor(ctx.stderr, ctx.env);
  const progress = ctx.stderr.isTTY === true && !ctx.json;
  const started = Date.now();
  const note = (text: string) => {
    if (!ctx.json) ctx.stderr.write(`${style.dim(text)}\n`);
  };

  let agent: AgentHandle;
  let created = false;
  if (values.agent) agent = await berth.agents.get(values.agent);
  else {
    const sessionId = values.session ?? (await berth.sessions.forUser(values.user ?? 'berth-cli')).id;
    note(`starting an agent in ${sessionId}…`);
    agent = await berth.agents.create(sessionId, {
      ...(values.compute ? { compute: values.compute as CreateAgentBody['compute'] } : {}),
      ...(values.model ? { model: values.model } : {}),
      ...(values.timeout ? { timeout: values.timeout } : {}),
    });
    created = true;
  }
  const abort = new AbortController();
  const onSignal = () => abort.abort(new UsageError('interrupted; the task goes on'));
  process.once('SIGINT', onSignal);
  const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
  let frame = 0;
  let spinning = false;
  const clearSpinner = () => {
    if (spinning) ctx.stderr.write('\r\u001b[2K');
    spinning = false;
  };
  let lastEvent = Date.now();
  // On a terminal a spinner with the time spent; in a log, a line after each quiet half-minute.
  const spinner = progress
    ? setInterval(() => {
        ctx.stderr.write(`\r\u001b[2K${style.cyan(frames[frame++ % frames.length]!)} ${style.dim(`working… ${Math.round((Date.now() - started) / 1000)}s`)}`);
        spinning = true;
      }, 120)
    : setInterval(() => {
        if (Date.now() - lastEvent < QUIET_NOTE_MS) return;
        lastEvent = Date.now();
        note(`still working (${Math.round((Date.now() - started) / 1000)}s)`);
      }, 1000);
  try {
    const run = await agent.run(positionals[0], { signal: abort.signal });
    note(`task ${run.taskId} on ${agent.id}`);
    for await (const event of run) {
      lastEvent = Date.now();
      if (ctx.json) printJson(ctx, { event: event.event, id: event.id, data: event.data });
      else {
        const text = describeEvent(event, styleFor(ctx.stdout, ctx.env));
        clearSpinner();
        if (text !== undefined) (event.event === 'output' ? ctx.stdout : ctx.stderr).write(`${text}\n`);
      }
    }
    const task = await run.result({ signal: abort.signal });
    clearSpinner();
    if (ctx.json) printJson(ctx, { task });
    else note(`${task.status} in ${((Date.now() - started) / 1000).toFixed(1)}s`);
    return task.status === 'completed' ? 0 : 1;
  } finally {
    if (spinner) clearInterval(spinner);
    clearSpinner();
    process.off('SIGINT', onSignal);
    if (created && !values.keep) await agent.terminate().catch(() => undefined);
  }
}

/** `berth login --url <url> --key <key>`: checks the key against the server, then saves both. */
async function loginCommand(args: string[], io: Streams & { stdin: NodeJS.ReadStream }): Promise<number> {
  const { values, positionals } = parse(args, {});
  if (positionals.length > 0 || !values.url || !values.key) throw new UsageError('usage: berth login --url <base url> --key <API key>');
  const ctx = context(io, values);
  // Any keyed read proves the URL and the key; a wrong one fails here, before anything is written.
  await new Berth({ url: values.url, apiKey: values.key }).agents.list({ limit: 1 });
  const path = writeConfig(io.env, { url: values.url, apiKey: values.key });
  if (ctx.json) printJson(ctx, { ok: true, url: values.url, config: path });
  else print(ctx, `logged in to ${values.url}; saved to ${path}`);
  return 0;
}

/** Runs a client command; the exit code (2 for a usage mistake, 1 for an API or connection error). */
export async function clientMain(argv: string[], io: Streams & { stdin: NodeJS.ReadStream }, help: (command: string) => string): Promise<number> {
  const [command, ...rest] = argv;
  // Flags end at `--`: what follows is the program's (`berth agents exec agt_… -- ls --help`).
  const flags = rest.includes('--') ? rest.slice(0, rest.indexOf('--')) : rest;
  if (flags.includes('--help') || flags.includes('-h')) {
    io.stdout.write(help(command!));
    return 0;
  }
  try {
    switch (command) {
      case 'agents':
        return await agentsCommand(rest, io);
      case 'run':
        return await runCommand(rest, io);
      case 'login':
        return await loginCommand(rest, io);
      default:
        throw new UsageError(`unknown command ${command}`);
    }
  } catch (error) {
    const style = styleFor(io.stderr, io.env);
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.stderr.write(`berth: ${(error as Error).message}\n`);
      return 2;
    }
    if (error instanceof BerthApiError) {
      if (flags.includes('--json')) io.stdout.write(`${JSON.stringify({ error: error.envelope, status: error.status })}\n`);
      io.stderr.write(`berth: ${style.red(error.code)}: ${error.envelope.message}${error.requestId ? style.dim(` (request ${error.requestId})`) : ''}\n`);
      return 1;
    }
    if (error instanceof BerthError) {
      io.stderr.write(`berth: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}
