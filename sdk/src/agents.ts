import { BerthConnectionError, BerthError, BerthStreamError, BerthTimeoutError } from './errors.js';
import type { Agent as AgentRecord, AgentPage, BackgroundOutput, BackgroundProcess, ExecResult, RunAccepted, Task } from './generated/openapi.js';
import type { Query, RequestOptions, Transport } from './http.js';
import { sleep } from './retry.js';
import { Files, Ports } from './files.js';
import { readEvents } from './sse.js';
import { openTerminal, type Terminal, type TerminalOptions } from './terminal.js';
import type { CreateAgentBody, ExecBody, ExecLanguage, ExecOptions, ListAgentsQuery, ProcessSignal, StreamExecBody } from './types.js';

const path = (id: string, rest = '') => `/v1/agents/${encodeURIComponent(id)}${rest}`;

/** The longest `waitSeconds` the server takes on `GET /v1/agents/{id}` and the agent's create. */
const MAX_SERVER_WAIT_SECONDS = 60;

/** How long `waitFor` and `create` wait for a status unless told (`waitTimeoutMs`). */
const DEFAULT_WAIT_MS = 120_000;

/**
 * The whole seconds the server may hold one request that waits for a status (`waitSeconds`):
 * under one try's timeout by a second, at most the server's 60, at most what is left of the wait.
 * Undefined when a try is too short for the server to hold it.
 */
function serverWaitSeconds(transport: Transport, options: RequestOptions, remainingMs: number): number | undefined {
  const perTry = Math.min(MAX_SERVER_WAIT_SECONDS, Math.floor((options.timeoutMs ?? transport.timeoutMs) / 1000) - 1);
  return perTry < 1 ? undefined : Math.max(1, Math.min(perTry, Math.ceil(remainingMs / 1000)));
}

/** Statuses an agent does not leave. */
const ENDED = new Set(['terminated', 'failed']);

export interface WaitOptions extends RequestOptions {
  /** Give up after this many ms (default 120 s). */
  waitTimeoutMs?: number;
}

export interface CreateAgentOptions extends WaitOptions {
  /** Wait until the sandbox is ready (`idle`) before resolving (default true). */
  waitUntilReady?: boolean;
}

/** A chunk of a streamed exec: output as it came, then the exit. */
export type ExecChunk =
  | { type: 'stdout' | 'stderr'; seq: number; data: string }
  | { type: 'exit'; exitCode: number; durationMs: number };

/** An event of the agent's stream (`GET /v1/agents/{id}/stream`), its data parsed. */
export interface AgentEvent {
  /** `thinking`, `tool_call`, `tool_result`, `output`, `error`, `approval.*`, `guardrail`. */
  event: string;
  /** The event id (resume point); heartbeats are not yielded. */
  id: string | undefined;
  data: { taskId?: string; [field: string]: unknown };
}

export interface AgentStreamOptions {
  signal?: AbortSignal;
  /** Start after this event id (what a reconnect sends as Last-Event-ID). */
  lastEventId?: string;
  /** Reconnect, from the last id seen, when the connection drops (default true). */
  reconnect?: boolean;
}

/** The wrappers of every agent route; `berth.agents`. */
export class Agents {
  constructor(private readonly transport: Transport) {}

  /**
   * Starts an agent in a session; by default resolves once its sandbox is ready. The create itself
   * waits for that (`POST …/agents?waitFor=idle`), so a ready agent takes one exchange; one still
   * booting when that wait ends is waited for as `waitFor` does.
   */
  async create(sessionId: string, body: CreateAgentBody = {}, options: CreateAgentOptions = {}): Promise<AgentHandle> {
    const wait = options.waitUntilReady !== false;
    const waitTimeoutMs = options.waitTimeoutMs ?? DEFAULT_WAIT_MS;
    const deadline = Date.now() + waitTimeoutMs;
    const waitSeconds = wait ? serverWaitSeconds(this.transport, options, waitTimeoutMs) : undefined;
    const query = waitSeconds === undefined ? undefined : { waitFor: 'idle', waitSeconds };
    const record = await this.transport.request<AgentRecord>({ method: 'POST', path: `/v1/sessions/${encodeURIComponent(sessionId)}/agents`, query, body, ...options });
    const agent = new AgentHandle(this.transport, record);
    if (wait) await agent.waitUntil(['idle'], options, deadline, waitTimeoutMs);
    return agent;
  }

  async get(id: string, options: RequestOptions = {}): Promise<AgentHandle> {
    return new AgentHandle(this.transport, await this.transport.request<AgentRecord>({ method: 'GET', path: path(id), ...options }));
  }

  /** One page of the agents across sessions, newest first. */
  list(query: Omit<ListAgentsQuery, 'limit'> & { limit?: number | string } = {}, options: RequestOptions = {}): Promise<AgentPage> {
    return this.transport.request<AgentPage>({ method: 'GET', path: '/v1/agents', query: query as Query, ...options });
  }

  /** Every agent matching the filters, page after page. */
  async *all(query: Omit<ListAgentsQuery, 'cursor' | 'limit'> & { limit?: number | string } = {}, options: RequestOptions = {}): AsyncGenerator<AgentRecord> {
    let cursor: string | undefined;
    do {
      const page = await this.list({ ...query, ...(cursor ? { cursor } : {}) }, options);
      yield* page.data;
      cursor = page.hasMore ? page.cursor : undefined;
    } while (cursor);
  }

  /** A handle for an agent id without a request (its `data` is filled by `refresh`). */
  handle(id: string): AgentHandle {
    return new AgentHandle(this.transport, { id } as AgentRecord);
  }
}

/** Exec in one agent's sandbox: `agent.exec(body)`, `agent.exec.python(code)`, `agent.exec.stream(body)`. */
export interface Exec {
  (body: ExecBody & { background?: false }, options?: RequestOptions): Promise<ExecResult>;
  python(code: string, options?: ExecOptions & RequestOptions): Promise<ExecResult>;
  typescript(code: string, options?: ExecOptions & RequestOptions): Promise<ExecResult>;
  bash(code: string, options?: ExecOptions & RequestOptions): Promise<ExecResult>;
  /** The output as it comes (SSE); breaking out of the loop ends the program. */
  stream(body: StreamExecBody, options?: { signal?: AbortSignal }): AsyncGenerator<ExecChunk>;
  /** Starts a background process and answers at once. */
  background(body: Omit<ExecBody, 'background'>, options?: RequestOptions): Promise<ProcessHandle>;
}

const LANGUAGES: readonly ExecLanguage[] = ['python', 'typescript', 'bash'];

/** Splits SDK options (signal, time limits) from the API's exec fields. */
function split<T extends RequestOptions>(options: T): [Omit<T, keyof RequestOptions>, RequestOptions] {
  const { signal, timeoutMs, maxRetries, ...rest } = options;
  return [rest, { signal, timeoutMs, maxRetries }];
}

/** One agent: its last known record in `data`, and everything that can be done with it. */
export class AgentHandle {
  readonly exec: Exec;
  readonly processes: Processes;
  /** Its sandbox's files: write, read, list, stat, mkdir, move, remove, archive. */
  readonly files: Files;
  /** Its sandbox's ports: expose, list, close, token, url, fetch. */
  readonly ports: Ports;

  constructor(
    private readonly transport: Transport,
    /** The agent as last read. */
    public data: AgentRecord,
  ) {
    this.processes = new Processes(transport, data.id);
    this.files = new Files(transport, data.id);
    this.ports = new Ports(transport, data.id);
    const run = (body: ExecBody, options: RequestOptions = {}) =>
      transport.request<ExecResult>({
        method: 'POST',
        path: path(this.id, '/exec'),
        body,
        // The program may take its whole timeout (120 s at most): the answer is awaited that long and a little more.
        timeoutMs: options.timeoutMs ?? ((body.timeout ?? 120) + 15) * 1000,
        ...(options.signal ? { signal: options.signal } : {}),
        ...(options.maxRetries !== undefined ? { maxRetries: options.maxRetries } : {}),
      });
    const exec = Object.assign(run, {
      stream: (body: StreamExecBody, options: { signal?: AbortSignal } = {}) => this.execStream(body, options),
      background: async (body: Omit<ExecBody, 'background'>, options: RequestOptions = {}) => {
        const record = await transport.request<BackgroundProcess>({ method: 'POST', path: path(this.id, '/exec'), body: { ...body, background: true }, ...options });
        return new ProcessHandle(transport, this.id, record);
      },
    }) as Exec;
    for (const language of LANGUAGES) {
      exec[language] = (code: string, options: ExecOptions & RequestOptions = {}) => {
        const [fields, request] = split(options);
        return run({ ...fields, language, code }, request);
      };
    }
    this.exec = exec;
  }

  get id(): string {
    return this.data.id;
  }

  get status(): AgentRecord['status'] {
    return this.data.status;
  }

  async refresh(options: RequestOptions = {}): Promise<AgentRecord> {
    this.data = await this.transport.request<AgentRecord>({ method: 'GET', path: path(this.id), ...options });
    return this.data;
  }

  /**
   * Resolves once the agent is in one of `statuses`; throws when it ends (terminated, failed) first
   * or the time is up. The server does the waiting (`GET /v1/agents/{id}?waitFor=…`, answered as soon
   * as the status is written), so the answer comes without a polling interval's delay; each such GET
   * waits less than one try's timeout.
   */
  async waitFor(statuses: AgentRecord['status'][], options: WaitOptions = {}): Promise<AgentRecord> {
    const waitTimeoutMs = options.waitTimeoutMs ?? DEFAULT_WAIT_MS;
    return this.waitUntil(statuses, options, Date.now() + waitTimeoutMs, waitTimeoutMs);
  }

  /** @internal `waitFor` with its deadline fixed by the caller (`create`, whose wait began before). */
  async waitUntil(statuses: AgentRecord['status'][], options: RequestOptions, deadline: number, waitTimeoutMs: number): Promise<AgentRecord> {
    for (;;) {
      if (statuses.includes(this.data.status)) return this.data;
      if (ENDED.has(this.data.status)) throw new BerthError(`agent ${this.id} is ${this.data.status}, not ${statuses.join(' or ')}`);
      const remainingMs = deadline - Date.now();
      if (remainingMs <= 0) throw new BerthError(`agent ${this.id} is still ${this.data.status} after ${waitTimeoutMs} ms`);
      const waitSeconds = serverWaitSeconds(this.transport, options, remainingMs);
      if (waitSeconds === undefined) {
        // A try too short for the server to hold it: ask again after a short sleep.
        await sleep(Math.min(100, remainingMs), options.signal);
        await this.refresh(options);
        continue;
      }
      const asked = Date.now();
      this.data = await this.transport.request<AgentRecord>({ method: 'GET', path: path(this.id), query: { waitFor: statuses.join(','), waitSeconds }, ...options });
      // Berth answers early only with a status waited for or an end; anything else (a proxy's
      // answer, say) is not asked again more than ten times a second.
      const tookMs = Date.now() - asked;
      if (!statuses.includes(this.data.status) && !ENDED.has(this.data.status) && tookMs < 100) await sleep(100 - tookMs, options.signal);
    }
  }

  /** Asks for a pause (`paused` follows once the current tool call is done; see `waitFor`). */
  async pause(options: RequestOptions = {}): Promise<AgentRecord> {
    this.data = await this.transport.request<AgentRecord>({ method: 'POST', path: path(this.id, '/pause'), ...options });
    return this.data;
  }

  async resume(options: RequestOptions = {}): Promise<AgentRecord> {
    this.data = await this.transport.request<AgentRecord>({ method: 'POST', path: path(this.id, '/resume'), ...options });
    return this.data;
  }

  /** Ends the agent; its sandbox and files are deleted. */
  async terminate(options: RequestOptions = {}): Promise<void> {
    await this.transport.request({ method: 'POST', path: path(this.id, '/terminate'), ...options });
  }

  /** A longer lifetime (`PATCH`, `{ timeout: '2h' }`). */
  async extend(timeout: string, options: RequestOptions = {}): Promise<AgentRecord> {
    this.data = await this.transport.request<AgentRecord>({ method: 'PATCH', path: path(this.id), body: { timeout }, idempotent: true, ...options });
    return this.data;
  }

  private async *execStream(body: StreamExecBody, options: { signal?: AbortSignal }): AsyncGenerator<ExecChunk> {
    const controller = new AbortController();
    const onAbort = () => controller.abort(options.signal!.reason);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const response = await this.transport.open({ method: 'POST', path: path(this.id, '/exec/stream'), body, accept: 'text/event-stream', signal: controller.signal });
      for await (const message of readEvents(response.body!)) {
        if (message.event === 'heartbeat') continue;
        const data = JSON.parse(message.data) as Record<string, unknown>;
        if (message.event === 'error') throw new BerthStreamError(String(data.code), String(data.message), data);
        if (message.event === 'stdout' || message.event === 'stderr') yield { type: message.event, seq: data.seq as number, data: data.data as string };
        if (message.event === 'exit') {
          yield { type: 'exit', exitCode: data.exitCode as number, durationMs: data.durationMs as number };
          return;
        }
      }
      throw new BerthStreamError('stream_ended', 'the exec stream ended before the program exited');
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
      // Leaving the loop early closes the connection, which ends the program (ADR 39).
      controller.abort();
    }
  }

  private connect(lastEventId: string | undefined, signal: AbortSignal | undefined): Promise<Response> {
    return this.transport.open({
      method: 'GET',
      path: path(this.id, '/stream'),
      accept: 'text/event-stream',
      ...(lastEventId ? { headers: { 'last-event-id': lastEventId } } : {}),
      ...(signal ? { signal } : {}),
    });
  }

  /**
   * The agent's events as they happen (SSE). Reconnects from the last event id when the
   * connection drops, so nothing is missed; heartbeats are not yielded.
   */
  stream(options: AgentStreamOptions = {}): AsyncGenerator<AgentEvent> {
    return this.events(undefined, options);
  }

  private async *events(connected: Response | undefined, options: AgentStreamOptions): AsyncGenerator<AgentEvent> {
    let lastEventId = options.lastEventId;
    let response = connected;
    const maxRetries = this.transport.retry.maxRetries;
    for (let failures = 0; ; ) {
      if (!response) {
        try {
          response = await this.connect(lastEventId, options.signal);
        } catch (error) {
          // An answer (404 for an agent gone, 401 for a revoked key) ends the stream; only a lost connection is tried again.
          const transient = error instanceof BerthConnectionError || error instanceof BerthTimeoutError;
          if (options.signal?.aborted || options.reconnect === false || !transient || failures >= maxRetries) throw error;
          failures++;
          await sleep(500 * failures, options.signal);
          continue;
        }
      }
      let received = false;
      try {
        for await (const message of readEvents(response.body!)) {
          received = true;
          failures = 0;
          if (message.event === 'heartbeat') continue;
          if (message.id) lastEventId = message.id;
          yield { event: message.event, id: message.id, data: message.data ? (JSON.parse(message.data) as AgentEvent['data']) : {} };
        }
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason;
        if (options.reconnect === false) throw error;
      }
      if (options.reconnect === false) return;
      response = undefined;
      if (!received) {
        // Closed without a word, again and again: the server is not serving this stream; stop rather than spin.
        if (failures >= maxRetries) return;
        failures++;
        await sleep(500 * failures, options.signal);
      }
    }
  }

  /**
   * Gives the agent a task: connects to its stream first (so no event is missed), then starts
   * the run. Iterate the result for the run's events; `result()` waits for the task's end.
   */
  async run(task: string, options: { signal?: AbortSignal } = {}): Promise<Run> {
    const controller = new AbortController();
    options.signal?.addEventListener('abort', () => controller.abort(options.signal!.reason), { once: true });
    const connected = await this.connect(undefined, controller.signal);
    let accepted: RunAccepted;
    try {
      accepted = await this.transport.request<RunAccepted>({ method: 'POST', path: path(this.id, '/run'), body: { task }, ...(options.signal ? { signal: options.signal } : {}) });
    } catch (error) {
      controller.abort();
      throw error;
    }
    return new Run(this.transport, accepted, this.events(connected, { signal: controller.signal }), controller);
  }

  /** A terminal (PTY over WebSocket) running `argv` (default bash) in the sandbox. */
  terminal(options: TerminalOptions = {}): Promise<Terminal> {
    return openTerminal(this.transport, this.id, options);
  }
}

/** A task given to an agent: `for await (const event of run)` its events, `result()` the task at its end. */
export class Run implements AsyncIterable<AgentEvent> {
  readonly taskId: string;
  readonly agentId: string;
  private done = false;

  constructor(
    private readonly transport: Transport,
    accepted: RunAccepted,
    private readonly events: AsyncGenerator<AgentEvent>,
    private readonly controller: AbortController,
  ) {
    this.taskId = accepted.taskId;
    this.agentId = accepted.agentId;
  }

  /** The run's events until its `output` or `error`. */
  async *[Symbol.asyncIterator](): AsyncGenerator<AgentEvent> {
    if (this.done) return;
    try {
      for await (const event of this.events) {
        if (event.data.taskId !== undefined && event.data.taskId !== this.taskId) continue;
        yield event;
        if (event.event === 'output' || event.event === 'error') return;
      }
    } catch (error) {
      if (!this.controller.signal.aborted) throw error;
    } finally {
      this.close();
    }
  }

  /** Closes the event stream (the run goes on). */
  close(): void {
    this.done = true;
    this.controller.abort();
  }

  /**
   * Waits for the task to complete, fail or be cancelled, and returns it. The task's end is written
   * with the run's last event (`output` or `error`): unless the run's events were read already, they
   * are read here, and that event has the task read again at once. The task is also read at doubling
   * intervals (100 ms to 2 s), for an end without an event (a task cancelled before it ran) or a
   * stream that broke.
   */
  async result(options: WaitOptions = {}): Promise<Task> {
    const deadline = Date.now() + (options.waitTimeoutMs ?? 600_000);
    let ended = this.done ? undefined : this.drain();
    try {
      for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
        const task = await this.transport.request<Task>({ method: 'GET', path: `/v1/tasks/${encodeURIComponent(this.taskId)}`, ...options });
        if (task.status === 'completed' || task.status === 'failed' || task.status === 'cancelled') return task;
        if (Date.now() > deadline) throw new BerthError(`task ${this.taskId} is still ${task.status}`);
        if (await sleep(delay, options.signal, ended)) ended = undefined;
      }
    } finally {
      this.close();
    }
  }

  /** Reads the run's events to its last one (or the stream's end), discarding them. */
  private async drain(): Promise<void> {
    try {
      for await (const event of this) void event;
    } catch {
      // The stream broke: the task is read at its intervals still.
    }
  }
}

/** The background processes of one agent. */
export class Processes {
  constructor(
    private readonly transport: Transport,
    private readonly agentId: string,
  ) {}

  async list(options: RequestOptions = {}): Promise<ProcessHandle[]> {
    const { data } = await this.transport.request<{ data: BackgroundProcess[] }>({ method: 'GET', path: path(this.agentId, '/processes'), ...options });
    return data.map((record) => new ProcessHandle(this.transport, this.agentId, record));
  }

  /** A handle for a pid without a request. */
  handle(pid: number): ProcessHandle {
    return new ProcessHandle(this.transport, this.agentId, { pid } as BackgroundProcess);
  }
}

/** A process started with `background: true`. */
export class ProcessHandle {
  constructor(
    private readonly transport: Transport,
    readonly agentId: string,
    /** The process as last read. */
    public data: BackgroundProcess,
  ) {}

  get pid(): number {
    return this.data.pid;
  }

  private route(rest: string): string {
    return path(this.agentId, `/processes/${this.pid}${rest}`);
  }

  async signal(signal: ProcessSignal = 'TERM', options: RequestOptions = {}): Promise<BackgroundProcess> {
    this.data = await this.transport.request<BackgroundProcess>({ method: 'POST', path: this.route('/signal'), body: { signal }, ...options });
    return this.data;
  }

  /** Waits up to `timeoutSeconds` (at most 120) for it to end; still `running` after that. Safe to repeat. */
  async wait(timeoutSeconds = 120, options: RequestOptions = {}): Promise<BackgroundProcess> {
    this.data = await this.transport.request<BackgroundProcess>({
      method: 'POST',
      path: this.route('/wait'),
      body: { timeout: timeoutSeconds },
      idempotent: true,
      timeoutMs: (timeoutSeconds + 15) * 1000,
      ...options,
    });
    return this.data;
  }

  /** The last 1 MiB of its stdout and stderr. */
  async logs(options: RequestOptions = {}): Promise<BackgroundOutput> {
    const output = await this.transport.request<BackgroundOutput>({ method: 'GET', path: this.route('/logs'), ...options });
    const { stdout: _o, stderr: _e, dropped: _d, ...record } = output;
    this.data = record;
    return output;
  }
}
