import type { ServerResponse } from 'node:http';
import type { BackgroundFollow, BackgroundProcess, Principal, TerminalHandle } from '@berth/common';
import { Counter, Gauge, type Registry } from 'prom-client';
import { z } from 'zod';
import { cwdSchema } from '../routes/schemas.js';
import type { AgentService } from '../services/agents.js';
import { ConnectError, ServerStream, sendUnary, toConnectError } from './connect.js';

/**
 * envd's `process` service (spec/envd/process/process.proto of e2b-dev/E2B, Apache-2.0) over
 * Berth's exec capabilities (ADR 39, ADR 44). A process without a PTY is a Berth background
 * process: it belongs to the sandbox's launcher, so it outlives the stream that started it, a
 * Berth restart and a pause and resume; the sandbox's launcher pushes its output to the stream as
 * it comes, stdout and stderr in the order they came (ADR 50), and keeps its stdin open as a pipe
 * when Start asks for `stdin`. A process with a PTY is a Berth terminal, which lives as long as this
 * API process holds it (its stream, or a later Connect, reads it).
 */

/** How often a followed process's stream is looked at for a keepalive due (at most). */
const KEEPALIVE_CHECK_MS = 1_000;
/** Configs (cmd, args, envs, tag) kept per sandbox for List and tag selectors; the oldest go first. */
const MAX_REMEMBERED = 1000;
/** Terminals get pids above this, so that they never meet a launcher's pid. */
const TERMINAL_PID_BASE = 1 << 30;

const selectorSchema = z.union([z.object({ pid: z.number().int().min(1) }).strict(), z.object({ tag: z.string().min(1).max(256) }).strict()]);
const ptySchema = z.object({ size: z.object({ cols: z.number().int().min(1).max(1000), rows: z.number().int().min(1).max(1000) }).strict() }).strict();
const inputSchema = z.union([z.object({ stdin: z.string() }).strict(), z.object({ pty: z.string() }).strict()]);

const startSchema = z
  .object({
    process: z
      .object({
        cmd: z.string().min(1).max(4096),
        args: z.array(z.string().max(128 * 1024)).max(1024).default([]),
        envs: z.record(z.string().max(256), z.string().max(32 * 1024)).default({}),
        cwd: z.string().optional(),
      })
      .strict(),
    pty: ptySchema.optional(),
    tag: z.string().min(1).max(256).optional(),
    stdin: z.boolean().optional(),
  })
  .strict();
const connectSchema = z.object({ process: selectorSchema }).strict();
const signalSchema = z.object({ process: selectorSchema, signal: z.union([z.enum(['SIGNAL_SIGTERM', 'SIGNAL_SIGKILL']), z.literal(15), z.literal(9)]) }).strict();
const sendInputSchema = z.object({ process: selectorSchema, input: inputSchema }).strict();
const closeStdinSchema = z.object({ process: selectorSchema }).strict();
const updateSchema = z.object({ process: selectorSchema, pty: ptySchema.optional() }).strict();
const streamInputSchema = z.union([
  z.object({ start: z.object({ process: selectorSchema }).strict() }).strict(),
  z.object({ data: z.object({ input: inputSchema }).strict() }).strict(),
  z.object({ keepalive: z.object({}).strict() }).strict(),
]);

function parse<T>(schema: z.ZodType<T>, message: unknown): T {
  const result = schema.safeParse(message);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new ConnectError('invalid_argument', `${issue.path.join('.') || 'message'}: ${issue.message}`);
  }
  return result.data;
}

interface ProcessConfig {
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
}

interface Terminal {
  handle: TerminalHandle;
  listeners: Set<(chunk: Buffer) => void>;
  ended?: { exitCode: number; signal?: number };
}

/** What this API process knows of a sandbox's processes beyond what the launcher keeps: the E2B config and tag of each. */
interface SandboxProcesses {
  configs: Map<number, { config: ProcessConfig; tag?: string }>;
  terminals: Map<number, Terminal>;
}

/** A shell word: the program and its arguments reach the sandbox as `exec 'cmd' 'arg'…`, quoted. */
export function shellQuote(word: string): string {
  return `'${word.replaceAll("'", "'\\''")}'`;
}

/** envd's end event of a process the launcher reports ended (a signal: exit code -1 and `signal: …`, as Go's os.ProcessState says). */
export function endEvent(process: Pick<BackgroundProcess, 'status' | 'exitCode'>): { exitCode: number; exited: boolean; status: string; error?: string } {
  const code = process.exitCode ?? -1;
  if (process.status === 'exited') return { exitCode: code, exited: true, status: `exit status ${code}` };
  if (process.status === 'failed') return { exitCode: -1, exited: false, status: 'failed', error: 'the process could not be started' };
  const signal = code > 128 ? code - 128 : 9;
  const name = signal === 9 ? 'killed' : signal === 15 ? 'terminated' : signal === 2 ? 'interrupt' : `signal ${signal}`;
  return { exitCode: -1, exited: false, status: `signal: ${name}`, ...(process.status === 'timedOut' ? { error: 'the process reached its time limit' } : {}) };
}

export interface ProcessServiceDeps {
  agents: AgentService;
  metrics: Registry;
}

export function createProcessService(deps: ProcessServiceDeps) {
  const { agents } = deps;
  const sandboxes = new Map<string, SandboxProcesses>();
  let nextTerminalPid = TERMINAL_PID_BASE;
  const streamsOpen = new Gauge({ name: 'berth_e2b_process_streams_open', help: 'envd process streams (Start, Connect) open now', labelNames: ['method'], registers: [deps.metrics] });
  const followsOpen = new Gauge({
    name: 'berth_e2b_process_follows_open',
    help: "Follows of a background process's output that the sandbox's launcher pushes to an envd stream, open now",
    registers: [deps.metrics],
  });
  const outputChunks = new Counter({
    name: 'berth_e2b_process_output_chunks_total',
    help: 'Chunks of a background process\'s output pushed by the sandbox to an envd stream, by stream',
    labelNames: ['stream'],
    registers: [deps.metrics],
  });

  function processesOf(agentId: string): SandboxProcesses {
    let known = sandboxes.get(agentId);
    if (!known) {
      known = { configs: new Map(), terminals: new Map() };
      sandboxes.set(agentId, known);
    }
    return known;
  }

  /** Records a started process's config; the oldest are dropped past MAX_REMEMBERED (a Map keeps insertion order). */
  function remember(known: SandboxProcesses, pid: number, record: { config: ProcessConfig; tag?: string }): void {
    known.configs.set(pid, record);
    for (const old of known.configs.keys()) {
      if (known.configs.size <= MAX_REMEMBERED) break;
      if (!known.terminals.has(old)) known.configs.delete(old);
    }
  }

  function pidOf(agentId: string, selector: z.infer<typeof selectorSchema>): number {
    if ('pid' in selector) return selector.pid;
    for (const [pid, entry] of processesOf(agentId).configs) if (entry.tag === selector.tag) return pid;
    throw new ConnectError('not_found', `no process with tag "${selector.tag}"`);
  }

  /**
   * Sends the process's output as the sandbox pushes it, and its end, from byte offsets `from` on
   * (from now on without them); returns when it ended or the client went away (the process runs
   * on: E2B's processes outlive their streams).
   */
  async function follow(stream: ServerStream, principal: Principal, agentId: string, pid: number, from: { stdout: number; stderr: number } | undefined, keepaliveMs: number): Promise<void> {
    // The stream holds a lease on the agent while it is open (ADR 45).
    const { sandbox, provider, release } = await agents.ready(principal, agentId, 'following a process');
    let lastSent = Date.now();
    const keepalive = setInterval(
      () => {
        if (Date.now() - lastSent < keepaliveMs) return;
        stream.send({ event: { keepalive: {} } });
        lastSent = Date.now();
      },
      Math.min(keepaliveMs, KEEPALIVE_CHECK_MS),
    );
    let following: BackgroundFollow | undefined;
    try {
      if (!provider.followBackground) throw new ConnectError('unimplemented', `provider "${provider.name}" has no background processes`);
      following = await provider.followBackground(sandbox, pid, {
        ...(from ? { from } : {}),
        onOutput: (name, chunk) => {
          outputChunks.inc({ stream: name });
          stream.send({ event: { data: { [name]: chunk.toString('base64') } } });
          lastSent = Date.now();
        },
      });
      followsOpen.inc();
      try {
        const ended = await Promise.race([following.ended, stream.closed.then(() => undefined)]);
        if (ended) {
          stream.send({ event: { end: endEvent(ended) } });
          stream.end();
        }
      } finally {
        followsOpen.dec();
      }
    } finally {
      clearInterval(keepalive);
      following?.stop();
      release();
    }
  }

  function attachTerminal(stream: ServerStream, terminal: Terminal, pid: number, buffered: Buffer[] = []): Promise<void> {
    stream.send({ event: { start: { pid } } });
    for (const chunk of buffered) stream.send({ event: { data: { pty: chunk.toString('base64') } } });
    const listener = (chunk: Buffer) => stream.send({ event: { data: { pty: chunk.toString('base64') } } });
    terminal.listeners.add(listener);
    return terminal.handle.done.then(
      (ended) => {
        terminal.listeners.delete(listener);
        const status = ended.signal ? { exitCode: -1, exited: false, status: `signal: ${ended.signal === 9 ? 'killed' : ended.signal === 15 ? 'terminated' : `signal ${ended.signal}`}` } : { exitCode: ended.exitCode, exited: true, status: `exit status ${ended.exitCode}` };
        stream.send({ event: { end: status } });
        stream.end();
      },
      (error: unknown) => {
        terminal.listeners.delete(listener);
        stream.end(toConnectError(error));
      },
    );
  }

  /** Runs one streaming method to its end: errors before or during the stream end it with a Connect error. */
  async function serveStream(res: ServerResponse, method: string, run: (stream: ServerStream) => Promise<void>): Promise<void> {
    const stream = new ServerStream(res);
    streamsOpen.inc({ method });
    try {
      await run(stream);
    } catch (error) {
      stream.end(toConnectError(error));
    } finally {
      streamsOpen.dec({ method });
    }
  }

  return {
    /** Start: a process, its pid first, then its output and its end. */
    async start(res: ServerResponse, principal: Principal, agentId: string, message: unknown, keepaliveMs: number): Promise<void> {
      const request = parse(startSchema, message);
      const { process: config } = request;
      let cwd: string | undefined;
      if (config.cwd !== undefined) {
        const checked = cwdSchema.safeParse(config.cwd);
        if (!checked.success) throw new ConnectError('invalid_argument', `process.cwd: ${checked.error.issues[0]!.message}`);
        cwd = checked.data;
      }
      const env = Object.keys(config.envs).length > 0 ? config.envs : undefined;
      const known = processesOf(agentId);
      const record = { config: { cmd: config.cmd, args: config.args, envs: config.envs, ...(cwd ? { cwd } : {}) }, ...(request.tag ? { tag: request.tag } : {}) };
      if (request.pty) {
        const { rows, cols } = request.pty.size;
        const early: Buffer[] = [];
        let terminal: Terminal | undefined;
        const handle = await agents.openTerminal(principal, agentId, {
          argv: [config.cmd, ...config.args],
          env,
          cwd,
          rows,
          cols,
          onOutput: (chunk) => {
            if (!terminal) early.push(chunk);
            else for (const listener of terminal.listeners) listener(chunk);
          },
        });
        terminal = { handle, listeners: new Set() };
        const pid = nextTerminalPid++;
        known.terminals.set(pid, terminal);
        remember(known, pid, record);
        void handle.done.finally(() => {
          known.terminals.delete(pid);
          known.configs.delete(pid);
        }).catch(() => undefined);
        await serveStream(res, 'Start', (stream) => attachTerminal(stream, terminal!, pid, early));
        return;
      }
      // Without `stdin: true` its stdin is closed from the start, as envd's is.
      const started = await agents.startBackground(
        principal,
        agentId,
        {
          language: 'bash',
          code: `exec ${[config.cmd, ...config.args].map(shellQuote).join(' ')}\n`,
          ...(env ? { env } : {}),
          ...(cwd ? { cwd } : {}),
        },
        { keepStdin: request.stdin === true },
      );
      remember(known, started.pid, record);
      await serveStream(res, 'Start', async (stream) => {
        stream.send({ event: { start: { pid: started.pid } } });
        await follow(stream, principal, agentId, started.pid, { stdout: 0, stderr: 0 }, keepaliveMs);
      });
    },

    /** Connect: a running process's output from now on, and its end. */
    async connect(res: ServerResponse, principal: Principal, agentId: string, message: unknown, keepaliveMs: number): Promise<void> {
      const pid = pidOf(agentId, parse(connectSchema, message).process);
      const terminal = processesOf(agentId).terminals.get(pid);
      if (terminal) {
        await serveStream(res, 'Connect', (stream) => attachTerminal(stream, terminal, pid));
        return;
      }
      // An unknown pid is answered before the stream starts (a wait of 0 answers at once).
      await agents.waitBackground(principal, agentId, pid, 0);
      await serveStream(res, 'Connect', async (stream) => {
        stream.send({ event: { start: { pid } } });
        await follow(stream, principal, agentId, pid, undefined, keepaliveMs);
      });
    },

    async list(res: ServerResponse, principal: Principal, agentId: string): Promise<void> {
      const known = processesOf(agentId);
      const running = (await agents.listBackground(principal, agentId)).filter((process) => process.status === 'running');
      // What is known of processes that ended is no longer needed (their end was read by whoever followed them).
      const alive = new Set(running.map((process) => process.pid));
      for (const pid of known.configs.keys()) if (!alive.has(pid) && !known.terminals.has(pid)) known.configs.delete(pid);
      const processes = [
        ...running.map((process) => {
          const entry = known.configs.get(process.pid);
          // A process this API process did not start (before a restart, or through /v1): its argv.
          const config = entry?.config ?? { cmd: process.argv[0] ?? '', args: process.argv.slice(1), envs: {} };
          return { config, pid: process.pid, ...(entry?.tag ? { tag: entry.tag } : {}) };
        }),
        ...[...known.terminals.keys()].map((pid) => {
          const entry = known.configs.get(pid)!;
          return { config: entry.config, pid, ...(entry.tag ? { tag: entry.tag } : {}) };
        }),
      ];
      sendUnary(res, { processes });
    },

    async sendSignal(res: ServerResponse, principal: Principal, agentId: string, message: unknown): Promise<void> {
      const request = parse(signalSchema, message);
      const pid = pidOf(agentId, request.process);
      const kill = request.signal === 'SIGNAL_SIGKILL' || request.signal === 9;
      const terminal = processesOf(agentId).terminals.get(pid);
      if (terminal) {
        // A terminal's program is ended by closing the terminal (SIGKILL to its process group).
        if (!kill) throw new ConnectError('unimplemented', 'signal: a PTY process takes SIGNAL_SIGKILL here (SIGTERM: send it through its input, e.g. Ctrl+C)');
        terminal.handle.close();
      } else {
        await agents.signalBackground(principal, agentId, pid, kill ? 'KILL' : 'TERM');
      }
      sendUnary(res, {});
    },

    async sendInput(res: ServerResponse, principal: Principal, agentId: string, message: unknown): Promise<void> {
      const request = parse(sendInputSchema, message);
      await writeInput(principal, agentId, pidOf(agentId, request.process), request.input);
      sendUnary(res, {});
    },

    /** StreamInput (client stream): the start names the process, then data messages carry input. */
    async streamInput(res: ServerResponse, principal: Principal, agentId: string, messages: unknown[]): Promise<void> {
      let pid: number | undefined;
      for (const message of messages) {
        const event = parse(streamInputSchema, message);
        if ('start' in event) pid = pidOf(agentId, event.start.process);
        else if ('data' in event) {
          if (pid === undefined) throw new ConnectError('invalid_argument', 'the first message must be start (naming the process)');
          await writeInput(principal, agentId, pid, event.data.input);
        }
      }
      const stream = new ServerStream(res);
      stream.send({});
      stream.end();
    },

    async closeStdin(res: ServerResponse, principal: Principal, agentId: string, message: unknown): Promise<void> {
      const pid = pidOf(agentId, parse(closeStdinSchema, message).process);
      if (processesOf(agentId).terminals.has(pid)) throw new ConnectError('failed_precondition', 'a PTY process has no stdin to close: send Ctrl+D (0x04) as its input');
      // A process started without `stdin: true` has its stdin closed already: failed_precondition.
      await agents.closeBackgroundInput(principal, agentId, pid);
      sendUnary(res, {});
    },

    async update(res: ServerResponse, _principal: Principal, agentId: string, message: unknown): Promise<void> {
      const request = parse(updateSchema, message);
      const pid = pidOf(agentId, request.process);
      const terminal = processesOf(agentId).terminals.get(pid);
      if (!terminal) throw new ConnectError('failed_precondition', `process ${pid} has no PTY to resize`);
      if (request.pty) terminal.handle.resize(request.pty.size.rows, request.pty.size.cols);
      sendUnary(res, {});
    },

    /** Forgets what it knew of a sandbox that ended. */
    forget(agentId: string): void {
      const known = sandboxes.get(agentId);
      for (const terminal of known?.terminals.values() ?? []) terminal.handle.close();
      sandboxes.delete(agentId);
    },
  };

  async function writeInput(principal: Principal, agentId: string, pid: number, input: z.infer<typeof inputSchema>): Promise<void> {
    const terminal = processesOf(agentId).terminals.get(pid);
    if ('pty' in input) {
      if (!terminal) throw new ConnectError('failed_precondition', `process ${pid} has no PTY: its input is stdin`);
      terminal.handle.write(Buffer.from(input.pty, 'base64'));
      return;
    }
    if (terminal) throw new ConnectError('failed_precondition', `process ${pid} is on a PTY: send its input as pty`);
    // Bytes for a process started with `stdin: true`; one started without it has its stdin closed (failed_precondition).
    await agents.writeBackgroundInput(principal, agentId, pid, Buffer.from(input.stdin, 'base64'));
  }
}

export type ProcessService = ReturnType<typeof createProcessService>;
