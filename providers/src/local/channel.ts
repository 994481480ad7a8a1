/**
 * The channel between the host and each sandbox's launcher (ADR 20): an exec costs no host process.
 *
 * The host listens on a unix socket in the sandbox's directory (`channel/launcher.sock`), mounted
 * read-only at CHANNEL_MOUNT; the launcher connects out to it (runsc's `--host-uds=open` lets it)
 * and keeps the connection. Both ways go frames: a 9-byte header (payload length u32, exec id u32,
 * kind u8, big-endian) and the payload. The host sends EXEC ({argv, env, cwd, limitMs,
 * maxOutputBytes}) and CANCEL; the launcher sends HELLO once connected, STDOUT and STDERR chunks,
 * and one OUTCOME per exec: launcher.ts's outcome with what it dropped past the output cap. The
 * outcome comes in a frame of its own, never in the program's output, so a program cannot forge it.
 *
 * Execs on one connection run side by side. A checkpoint keeps the launcher's end of the socket;
 * after a restore it reads the end of the connection and connects again, as it does when Berth
 * restarts. When the connection ends, the launcher kills the programs that were running on it
 * (the host gave up on them), and the host fails their execs.
 *
 * ADR 39 adds: `stdin` (base64) and `pty` ({rows, cols}: a terminal exec, whose output comes as
 * STDOUT) and `background` in EXEC; INPUT (bytes for a terminal; empty: end of input) and RESIZE
 * from the host; CONTROL (list, signal, output, wait of background processes; largest and kill for
 * the memory guard) from the host, and
 * REPLY from the launcher (the answer to a CONTROL, or a background EXEC's process record).
 * Background processes are the launcher's, not the connection's: they outlive it, and a checkpoint.
 *
 * ADR 40 (protocol 3) adds FILE ({op, path, ...}: stat, list, mkdir, remove, move answered by a
 * REPLY; read, tar and write are streams) and TUNNEL ({port}: a TCP connection to 127.0.0.1:port in
 * the sandbox, a stream once its REPLY says connected). A stream's bytes go both ways as DATA, its
 * end as END ({} or {error, message}; a write's {info}), and WINDOW (u32) gives the sender back the
 * room the receiver consumed: neither side holds more than STREAM_WINDOW_BYTES of a stream.
 *
 * ADR 50 (protocol 4) adds `keepStdin` in a background EXEC (its stdin stays open as a pipe) and
 * CONTROL's input ({pid, data}: base64 bytes for it) and closeStdin ({pid}); and CONTROL's follow
 * ({pid, from?: [stdout, stderr] byte offsets}): answered by a REPLY (the process's record), then
 * the process's output as STDOUT and STDERR frames of the follow's id, in the order it came, as it
 * comes, then END with its record once it ended. CANCEL with the follow's id ends the follow.
 *
 * ADR 51 (protocol 4 too) adds FILE `watch` ({path, recursive}): a stream of a directory's changes, one
 * JSON line `{name, type}` each, that ends when the host ends it (or with an error when the
 * directory itself went); and CANCEL of a stream's id ends the stream.
 */

import { randomBytes } from 'node:crypto';
import { mkdir, rename, stat } from 'node:fs/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { ApiError, ProcessNotFoundError, ProviderError, type BackgroundFollow, type BackgroundFollowRequest, type BackgroundOutput, type BackgroundProcess, type Logger } from '@berth/common';
import { OutputLimit } from '../program.js';
import { outcomeSchema, type ExecOutcome } from './launcher.js';

/** Where the sandbox sees the directory of the host's end of the channel (read-only). */
export const CHANNEL_MOUNT = '/run/berth/channel';
/** The socket's name in that directory, on both sides. */
export const CHANNEL_SOCKET = 'launcher.sock';

export const FRAME_HEADER_BYTES = 9;
/** Largest frame the host sends, and the launcher accepts: an exec's argv and environment, a piece of input. */
export const MAX_FRAME_BYTES = 1 << 20;
/**
 * Largest frame the host accepts from a launcher. Chunks of output are smaller, but the REPLY to
 * `output` carries both streams' last BACKGROUND_OUTPUT_BYTES in base64 (about 2.7 MiB for two
 * full ones), which a 1 MiB limit refused by closing the connection.
 */
export const MAX_RECEIVED_FRAME_BYTES = 4 << 20;

export const FrameKind = {
  hello: 1,
  exec: 2,
  stdout: 3,
  stderr: 4,
  outcome: 5,
  cancel: 6,
  input: 7,
  resize: 8,
  control: 9,
  reply: 10,
  file: 11,
  tunnel: 12,
  data: 13,
  end: 14,
  window: 15,
} as const;
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

export interface Frame {
  id: number;
  kind: number;
  payload: Buffer;
}

export function encodeFrame(id: number, kind: FrameKind, payload: Buffer = Buffer.alloc(0)): Buffer {
  const header = Buffer.alloc(FRAME_HEADER_BYTES);
  header.writeUInt32BE(payload.length, 0);
  header.writeUInt32BE(id, 4);
  header.writeUInt8(kind, 8);
  return Buffer.concat([header, payload]);
}

export class FrameError extends Error {
  override name = 'FrameError';
}

/** Cuts a byte stream into frames, whatever the chunks it arrives in. */
export class FrameReader {
  private buffered: Buffer = Buffer.alloc(0);

  /** The frames completed by `chunk`; throws FrameError on a frame larger than MAX_RECEIVED_FRAME_BYTES. */
  push(chunk: Buffer): Frame[] {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    const frames: Frame[] = [];
    let offset = 0;
    while (this.buffered.length - offset >= FRAME_HEADER_BYTES) {
      const length = this.buffered.readUInt32BE(offset);
      if (length > MAX_RECEIVED_FRAME_BYTES) throw new FrameError(`a frame of ${length} bytes`);
      const end = offset + FRAME_HEADER_BYTES + length;
      if (this.buffered.length < end) break;
      frames.push({ id: this.buffered.readUInt32BE(offset + 4), kind: this.buffered.readUInt8(offset + 8), payload: this.buffered.subarray(offset + FRAME_HEADER_BYTES, end) });
      offset = end;
    }
    this.buffered = this.buffered.subarray(offset);
    return frames;
  }
}

/** Protocol 2 (ADR 39) adds stdin, terminals and background processes; a launcher of protocol 1 has none of them. */
const helloSchema = z.object({ protocol: z.union([z.literal(1), z.literal(2), z.literal(3), z.literal(4)]), pid: z.number().int() });
export const PROTOCOL_WITH_ADR_39 = 2;
/** Protocol 3 (ADR 40) adds files and tunnels. */
export const PROTOCOL_WITH_ADR_40 = 3;
/** Protocol 4 (ADR 50) adds follows of background processes and their stdin kept open. */
export const PROTOCOL_WITH_ADR_50 = 4;
/** Protocol 4 (ADR 51) also adds directory watches (FILE `watch`), and CANCEL of a stream. */
export const PROTOCOL_WITH_ADR_51 = PROTOCOL_WITH_ADR_50;
/** Input for a background process goes in pieces of this many bytes at most (base64 in a frame under MAX_FRAME_BYTES). */
const INPUT_PIECE_BYTES = 512 * 1024;
/** Bytes of a stream either side may send before the other's WINDOW. */
export const STREAM_WINDOW_BYTES = 4 << 20;
/** A DATA frame's payload at most. */
export const DATA_CHUNK_BYTES = 1 << 18;
/** What the launcher dropped of stdout and stderr past maxOutputBytes. */
const droppedSchema = z.object({ dropped: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]) });

/** An OUTCOME frame's payload, or undefined when it is not one. */
export function parseChannelOutcome(payload: Buffer): { outcome: ExecOutcome; dropped: [number, number] } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload.toString('utf8'));
  } catch {
    return undefined;
  }
  const outcome = outcomeSchema.safeParse(value);
  const dropped = droppedSchema.safeParse(value);
  return outcome.success && dropped.success ? { outcome: outcome.data, dropped: dropped.data.dropped } : undefined;
}

export interface ChannelExecRequest {
  argv: readonly string[];
  env: Record<string, string>;
  cwd: string;
  /** The launcher stops the program at this limit (TERM, KILL two seconds later); none when undefined. */
  limitMs: number | undefined;
  /** Written to the program's stdin, which is then closed (empty otherwise). */
  stdin?: Buffer;
  /** Each chunk of output as it comes (a streamed exec); it is kept for the result too, up to maxOutputBytes. */
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  /** Cancels the exec (the launcher kills the program). */
  signal?: AbortSignal;
  /** Bytes kept of each of stdout and stderr; the launcher counts the rest and does not send it. */
  maxOutputBytes: number;
  /** The host gives up (CANCEL: the launcher kills the program) after this long. */
  timeoutMs: number;
}

export type ChannelExecResult =
  | { kind: 'ended'; outcome: ExecOutcome; stdout: string; stderr: string; durationMs: number }
  /** The host's own timer ran out: the launcher did not answer in time (the program was cancelled). */
  | { kind: 'timedOut'; durationMs: number }
  /** The connection ended before the outcome came (the sandbox ended, or was checkpointed). */
  | { kind: 'lost'; durationMs: number };

interface Pending {
  stdout: OutputLimit;
  stderr: OutputLimit;
  onOutput?: ChannelExecRequest['onOutput'];
  settle: (result: ChannelExecResult) => void;
}

/** A terminal exec's handle: its input, its size, and its end. */
export interface TerminalSession {
  write(data: Buffer): void;
  resize(rows: number, cols: number): void;
  /** Kills the program. */
  cancel(): void;
  readonly done: Promise<ChannelExecResult>;
}

/** A background process as the launcher reports it. */
export const backgroundProcessSchema = z.object({
  pid: z.number().int(),
  argv: z.array(z.string()),
  startedAt: z.number().int(),
  running: z.boolean(),
  endedAt: z.number().int().nullable(),
  outcome: outcomeSchema.nullable(),
});
export type BackgroundProcessRecord = z.infer<typeof backgroundProcessSchema>;

/** The launcher's record of a background process, as the API shows it (both providers' launchers keep it). */
export function backgroundProcess(record: BackgroundProcessRecord): BackgroundProcess {
  const { outcome } = record;
  return {
    pid: record.pid,
    argv: record.argv,
    startedAt: new Date(record.startedAt).toISOString(),
    status: outcome === null ? 'running' : outcome.outcome,
    exitCode: outcome === null || outcome.outcome === 'failed' ? null : outcome.exitCode,
    endedAt: record.endedAt === null ? null : new Date(record.endedAt).toISOString(),
  };
}

/** A CONTROL frame's request. */
export type ControlRequest =
  | { op: 'list' }
  | { op: 'signal'; pid: number; signal: string }
  | { op: 'output'; pid: number }
  /** ADR 50: answered by the record, then the output past `from` (none: from now) as it comes, then END. */
  | { op: 'follow'; pid: number; from?: [number, number] }
  | { op: 'input'; pid: number; data: string }
  | { op: 'closeStdin'; pid: number }
  | { op: 'wait'; pid: number; timeoutMs: number }
  /** Out of memory (memory.ts): the sandbox's program with the most resident memory, and its kill. */
  | { op: 'largest' }
  | { op: 'kill'; pid: number }
  /** A claimed warm pod (ADR 53): the agent's environment, for every program the launcher starts from then on. */
  | { op: 'environment'; env: Record<string, string> };

/**
 * Raised for a CONTROL the launcher refused: `not_found` (no such process), `bad_request`, and for
 * input `closed` (the process's stdin is not open) or `full` (it has not read what it was given).
 */
export class ControlError extends Error {
  override name = 'ControlError';
  constructor(
    readonly code: 'not_found' | 'bad_request' | 'closed' | 'full',
    message: string,
  ) {
    super(message);
  }
}

/** The connection ended (or the launcher did not answer in time) before a REPLY came. */
export class ChannelLostError extends Error {
  override name = 'ChannelLostError';
}

const controlErrorSchema = z.object({ error: z.enum(['not_found', 'bad_request', 'closed', 'full']), message: z.string() });

/** The answer to CONTROL output: a background process's record with the last bytes of its streams. */
const backgroundOutputSchema = backgroundProcessSchema.extend({ stdout: z.string(), stderr: z.string(), dropped: z.tuple([z.number().int(), z.number().int()]) });

/** The launcher's answer to CONTROL output, as the API shows it (both providers' launchers answer it). */
export function backgroundOutput(answer: unknown): BackgroundOutput {
  const output = backgroundOutputSchema.parse(answer);
  return {
    ...backgroundProcess(output),
    stdout: Buffer.from(output.stdout, 'base64').toString('utf8'),
    stderr: Buffer.from(output.stderr, 'base64').toString('utf8'),
    dropped: { stdout: output.dropped[0], stderr: output.dropped[1] },
  };
}

/** A request to a sandbox's launcher that failed, in the provider's terms (both providers' launchers answer alike). */
export function controlFailure(provider: string, ref: { id: string }, error: unknown, pid?: number): unknown {
  if (error instanceof ControlError && error.code === 'not_found' && pid !== undefined) return new ProcessNotFoundError(pid);
  if (error instanceof ControlError || error instanceof ChannelLostError) return new ProviderError(provider, error.message, { sandbox: ref.id });
  return error;
}

/** A follow's frames (STDOUT, STDERR, END), or its loss with the connection. */
interface Follower {
  receive(kind: number, payload: Buffer): void;
  lose(): void;
}

/** One launcher's connection, with the execs running on it. */
export class Connection {
  private readonly reader = new FrameReader();
  private readonly pending = new Map<number, Pending>();
  private readonly replies = new Map<number, (payload: Buffer | undefined) => void>();
  private readonly streams = new Map<number, ChannelStream>();
  private readonly followers = new Map<number, Follower>();
  private nextId = 1;
  closed = false;
  /** The protocol the launcher said in its hello. */
  protocol = 1;

  constructor(
    readonly socket: Socket,
    private readonly onHello: (connection: Connection) => void,
    private readonly onClose: (connection: Connection) => void,
    private readonly log: Logger,
  ) {
    socket.unref(); // an idle launcher's connection does not keep Berth running
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('error', () => undefined); // 'close' follows
    socket.on('close', () => this.close());
  }

  private receive(chunk: Buffer): void {
    let frames: Frame[];
    try {
      frames = this.reader.push(chunk);
    } catch (error) {
      this.log.warn({ err: error }, "the sandbox's launcher sent a bad frame: closing its channel");
      this.socket.destroy();
      return;
    }
    for (const { id, kind, payload } of frames) {
      const follower = this.followers.get(id);
      if (follower !== undefined && (kind === FrameKind.stdout || kind === FrameKind.stderr || kind === FrameKind.end)) {
        follower.receive(kind, payload);
        continue;
      }
      if (kind === FrameKind.data || kind === FrameKind.end || kind === FrameKind.window) {
        this.streams.get(id)?.receive(kind, payload);
        continue;
      }
      const exec = this.pending.get(id);
      // An OUTCOME for an id awaiting a REPLY: a background EXEC the launcher refused or could not start.
      if (kind === FrameKind.reply || (kind === FrameKind.outcome && this.replies.has(id))) {
        const answer = this.replies.get(id);
        this.replies.delete(id);
        answer?.(payload);
        continue;
      }
      if (kind === FrameKind.hello) {
        const hello = helloSchema.safeParse(safeJson(payload));
        if (hello.success) {
          this.protocol = hello.data.protocol;
          this.onHello(this);
        } else {
          this.log.warn({ hello: payload.toString('utf8') }, "the sandbox's launcher said an unknown hello: closing its channel");
          this.socket.destroy();
        }
      } else if (exec === undefined) {
        continue; // an exec the host gave up on
      } else if (kind === FrameKind.stdout) {
        exec.stdout.push(payload);
        exec.onOutput?.('stdout', payload);
      } else if (kind === FrameKind.stderr) {
        exec.stderr.push(payload);
        exec.onOutput?.('stderr', payload);
      } else if (kind === FrameKind.outcome) {
        this.pending.delete(id);
        const parsed = parseChannelOutcome(payload);
        if (parsed === undefined) {
          exec.settle({ kind: 'ended', outcome: { outcome: 'failed', error: `the launcher answered ${payload.toString('utf8').slice(0, 200)}` }, stdout: '', stderr: '', durationMs: 0 });
          continue;
        }
        exec.stdout.drop(parsed.dropped[0]);
        exec.stderr.drop(parsed.dropped[1]);
        exec.settle({ kind: 'ended', outcome: parsed.outcome, stdout: exec.stdout.text(), stderr: exec.stderr.text(), durationMs: 0 });
      }
    }
  }

  private takeId(): number {
    const id = this.nextId;
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1;
    return id;
  }

  exec(request: ChannelExecRequest, terminal?: { rows: number; cols: number }): Promise<ChannelExecResult> {
    return this.start(this.takeId(), request, terminal);
  }

  private start(id: number, request: ChannelExecRequest, terminal?: { rows: number; cols: number }): Promise<ChannelExecResult> {
    const started = performance.now();
    const { timeoutMs, argv, env, cwd, limitMs, maxOutputBytes, stdin, onOutput, signal } = request;
    return new Promise((resolve) => {
      const cancel = () => {
        if (this.pending.has(id) && !this.closed) this.socket.write(encodeFrame(id, FrameKind.cancel));
      };
      const timer = setTimeout(() => {
        if (!this.pending.delete(id)) return;
        signal?.removeEventListener('abort', cancel);
        if (!this.closed) this.socket.write(encodeFrame(id, FrameKind.cancel));
        resolve({ kind: 'timedOut', durationMs: Math.round(performance.now() - started) });
      }, timeoutMs);
      signal?.addEventListener('abort', cancel, { once: true });
      this.pending.set(id, {
        stdout: new OutputLimit(maxOutputBytes),
        stderr: new OutputLimit(maxOutputBytes),
        ...(onOutput ? { onOutput } : {}),
        settle: (result) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', cancel);
          resolve({ ...result, durationMs: Math.round(performance.now() - started) });
        },
      });
      if (this.closed) return this.close();
      const payload = Buffer.from(
        JSON.stringify({
          argv,
          env,
          cwd,
          ...(limitMs !== undefined ? { limitMs: Math.max(1, Math.ceil(limitMs)) } : {}),
          maxOutputBytes,
          ...(stdin !== undefined ? { stdin: stdin.toString('base64') } : {}),
          ...(terminal ? { pty: terminal } : {}),
        }),
      );
      this.socket.write(encodeFrame(id, FrameKind.exec, payload));
      if (signal?.aborted) cancel();
    });
  }

  /** Starts a program on a terminal of its own; its output goes to `request.onOutput` as stdout. */
  terminal(request: ChannelExecRequest, size: { rows: number; cols: number }): TerminalSession {
    const id = this.takeId();
    const done = this.start(id, request, size);
    const send = (kind: FrameKind, payload: Buffer) => {
      if (this.pending.has(id) && !this.closed) this.socket.write(encodeFrame(id, kind, payload));
    };
    return {
      write: (data) => {
        for (let offset = 0; offset < data.length; offset += MAX_FRAME_BYTES) send(FrameKind.input, data.subarray(offset, offset + MAX_FRAME_BYTES));
      },
      resize: (rows, cols) => send(FrameKind.resize, Buffer.from(JSON.stringify({ rows, cols }))),
      cancel: () => send(FrameKind.cancel, Buffer.alloc(0)),
      done,
    };
  }

  /** Starts a background process (it outlives this connection); its record once it runs. */
  async background(request: Omit<ChannelExecRequest, 'timeoutMs' | 'onOutput' | 'signal'> & { keepStdin?: boolean }, waitMs: number): Promise<BackgroundProcessRecord> {
    const { argv, env, cwd, limitMs, stdin, keepStdin } = request;
    if (keepStdin) this.requireProtocol(PROTOCOL_WITH_ADR_50, 'keepStdin');
    const payload = {
      argv,
      env,
      cwd,
      ...(limitMs !== undefined ? { limitMs: Math.max(1, Math.ceil(limitMs)) } : {}),
      maxOutputBytes: 0,
      background: true,
      ...(stdin !== undefined ? { stdin: stdin.toString('base64') } : {}),
      ...(keepStdin ? { keepStdin: true } : {}),
    };
    const answer = await this.ask(FrameKind.exec, payload, waitMs);
    const record = backgroundProcessSchema.safeParse(answer);
    if (record.success) return record.data;
    const failed = parseChannelOutcome(Buffer.from(JSON.stringify(answer)));
    if (failed?.outcome) {
      // The launcher answered, with how the program ended before it could run (a working
      // directory that does not exist, a program it could not start): the request's fault.
      throw new ApiError('unprocessable_entity', `the program could not be started in the sandbox (check cwd and the program): ${JSON.stringify(failed.outcome).slice(0, 300)}`, {
        fields: { cwd: ['the program could not be started there'] },
      });
    }
    throw new ChannelLostError(`the launcher did not start the process: ${JSON.stringify(answer).slice(0, 300)}`);
  }

  /**
   * Follows a background process (protocol 4): its output goes to `request.onOutput` as the
   * launcher pushes it, from `request.from` on (from now without it), until it ends or `stop`.
   */
  async follow(pid: number, request: BackgroundFollowRequest, waitMs: number): Promise<BackgroundFollow> {
    this.requireProtocol(PROTOCOL_WITH_ADR_50, 'following a background process');
    const id = this.takeId();
    let settle!: (record: BackgroundProcess | undefined) => void;
    let fail!: (error: Error) => void;
    const ended = new Promise<BackgroundProcess | undefined>((resolve, reject) => ((settle = resolve), (fail = reject)));
    ended.catch(() => undefined);
    this.followers.set(id, {
      receive: (kind, payload) => {
        if (kind !== FrameKind.end) return request.onOutput(kind === FrameKind.stdout ? 'stdout' : 'stderr', payload);
        this.followers.delete(id);
        const record = backgroundProcessSchema.safeParse(safeJson(payload));
        if (record.success) settle(backgroundProcess(record.data));
        else fail(new ChannelLostError(`the launcher ended a follow with ${payload.toString('utf8').slice(0, 200)}`));
      },
      lose: () => fail(new ChannelLostError("the sandbox's launcher went away")),
    });
    const stop = () => {
      if (!this.followers.delete(id)) return;
      if (!this.closed) this.socket.write(encodeFrame(id, FrameKind.cancel));
      settle(undefined);
    };
    const from = request.from;
    let answer: unknown;
    try {
      answer = await this.control({ op: 'follow', pid, ...(from ? { from: [from.stdout, from.stderr] } : {}) }, waitMs, id);
    } catch (error) {
      stop();
      throw error;
    }
    return { process: backgroundProcess(backgroundProcessSchema.parse(answer)), ended, stop };
  }

  /** Writes `data` to the stdin of a background process started with keepStdin (protocol 4). */
  async backgroundInput(pid: number, data: Buffer, waitMs: number): Promise<void> {
    this.requireProtocol(PROTOCOL_WITH_ADR_50, 'stdin of a background process');
    // One piece at least: empty input still finds out whether the process's stdin is open.
    let offset = 0;
    do {
      await this.inputControl({ op: 'input', pid, data: data.subarray(offset, offset + INPUT_PIECE_BYTES).toString('base64') }, waitMs);
      offset += INPUT_PIECE_BYTES;
    } while (offset < data.length);
  }

  /** Closes the stdin of a background process started with keepStdin, once what was written is (protocol 4). */
  async closeBackgroundInput(pid: number, waitMs: number): Promise<void> {
    this.requireProtocol(PROTOCOL_WITH_ADR_50, 'stdin of a background process');
    await this.inputControl({ op: 'closeStdin', pid }, waitMs);
  }

  private async inputControl(request: ControlRequest, waitMs: number): Promise<void> {
    try {
      await this.control(request, waitMs);
    } catch (error) {
      if (error instanceof ControlError && error.code === 'closed') throw new ApiError('conflict', error.message);
      if (error instanceof ControlError && error.code === 'full') throw new ApiError('rate_limited', `${error.message}: try again once it read it`);
      throw error;
    }
  }

  /** 501 naming `field` unless the launcher speaks `protocol` or later: `what` needs a newer launcher. */
  requireProtocol(protocol: number, what: string, field = 'launcher'): void {
    if (this.protocol < protocol) {
      throw new ApiError('not_implemented', `${what}: this sandbox's launcher is from an older Berth; terminate the agent and create it again`, { field });
    }
  }

  /** A CONTROL request's answer (a WAIT's comes when the process ends or its time is up). */
  async control(request: ControlRequest, waitMs: number, id?: number): Promise<unknown> {
    const answer = await this.ask(FrameKind.control, request, waitMs, id);
    const refused = controlErrorSchema.safeParse(answer);
    if (refused.success) throw new ControlError(refused.data.error, refused.data.message);
    return answer;
  }

  /** A FILE request that is not a stream (stat, list, mkdir, remove, move): the launcher's answer. */
  file(request: Record<string, unknown>, waitMs: number): Promise<unknown> {
    return this.ask(FrameKind.file, request, waitMs);
  }

  /**
   * Opens a stream: a FILE read, tar or write, or a TUNNEL. Resolves with the launcher's REPLY and
   * the stream once the REPLY came; a REPLY with `error` is answered as `StreamRefusedError`.
   */
  async openStream(kind: 'file' | 'tunnel', request: Record<string, unknown>, waitMs: number): Promise<{ reply: Record<string, unknown>; stream: ChannelStream }> {
    const id = this.takeId();
    const stream = new ChannelStream(
      id,
      (frameKind, payload = Buffer.alloc(0)) => {
        if (this.closed) return;
        // The header and the payload as two writes of one flush: a stream's bytes are not copied into a frame.
        const header = Buffer.alloc(FRAME_HEADER_BYTES);
        header.writeUInt32BE(payload.length, 0);
        header.writeUInt32BE(id, 4);
        header.writeUInt8(frameKind, 8);
        this.socket.cork();
        this.socket.write(header);
        this.socket.write(payload);
        this.socket.uncork();
      },
      () => this.streams.delete(id),
    );
    this.streams.set(id, stream);
    let reply: unknown;
    try {
      reply = await this.ask(kind === 'file' ? FrameKind.file : FrameKind.tunnel, request, waitMs, id);
    } catch (error) {
      stream.destroy(error as Error);
      throw error;
    }
    const refused = streamErrorSchema.safeParse(reply);
    if (refused.success || typeof reply !== 'object' || reply === null) {
      this.streams.delete(id);
      stream.destroy();
      throw refused.success ? new StreamRefusedError(refused.data.error, refused.data.message) : new ChannelLostError(`the launcher answered ${JSON.stringify(reply).slice(0, 200)}`);
    }
    // A read or a tar takes nothing from the host: its sending side ends at once.
    if (kind === 'file' && request.op !== 'write') stream.end();
    return { reply: reply as Record<string, unknown>, stream };
  }

  private ask(kind: FrameKind, request: unknown, waitMs: number, id = this.takeId()): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.replies.delete(id);
        reject(new ChannelLostError(`the sandbox's launcher did not answer in ${waitMs} ms`));
      }, waitMs);
      this.replies.set(id, (payload) => {
        clearTimeout(timer);
        if (payload === undefined) return reject(new ChannelLostError("the sandbox's launcher went away"));
        resolve(safeJson(payload));
      });
      if (this.closed) return this.close();
      this.socket.write(encodeFrame(id, kind, Buffer.from(JSON.stringify(request))));
    });
  }

  /** Every exec still running on it is lost. */
  close(): void {
    this.closed = true;
    this.socket.destroy();
    for (const exec of this.pending.values()) exec.settle({ kind: 'lost', durationMs: 0 });
    this.pending.clear();
    for (const answer of this.replies.values()) answer(undefined);
    this.replies.clear();
    for (const stream of this.streams.values()) stream.destroy(new ChannelLostError("the sandbox's launcher went away"));
    this.streams.clear();
    for (const follower of this.followers.values()) follower.lose();
    this.followers.clear();
    this.onClose(this);
  }
}

const streamErrorSchema = z.object({ error: z.string(), message: z.string().default('') });

/** A FILE or TUNNEL request the launcher refused, or a stream it ended with an error: `code` as the launcher said it. */
export class StreamRefusedError extends Error {
  override name = 'StreamRefusedError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * One stream of a connection (a file's bytes, a tar, a tunnel), as a Duplex under windows: what is
 * written goes as DATA while the launcher gave room; DATA that came is pushed, and its room given
 * back as the reader takes it. Writing ends with END; the launcher's END ends reading (`ended`
 * settles with its record). Destroyed before both ends, it tells the launcher to give up.
 */
export class ChannelStream extends Duplex {
  private credit = STREAM_WINDOW_BYTES;
  private ungranted = 0;
  private wakeWriter: (() => void) | undefined;
  private sentEnd = false;
  private receivedEnd = false;
  /** The launcher's END record (a written file's `{info}`); rejected when the stream failed. */
  readonly ended: Promise<Record<string, unknown>>;
  private settleEnded!: { resolve: (record: Record<string, unknown>) => void; reject: (error: Error) => void };

  constructor(
    readonly id: number,
    private readonly sendFrame: (kind: FrameKind, payload?: Buffer) => void,
    private readonly forget: () => void,
  ) {
    // What the host holds of a stream's incoming bytes: the launcher's window, and one chunk more.
    super({ readableHighWaterMark: DATA_CHUNK_BYTES, writableHighWaterMark: DATA_CHUNK_BYTES });
    this.ended = new Promise((resolve, reject) => (this.settleEnded = { resolve, reject }));
    this.ended.catch(() => undefined);
    // A stream lost with its connection is seen by whoever reads or writes it (its pipeline), not as a crash.
    this.on('error', () => undefined);
  }

  receive(kind: number, payload: Buffer): void {
    if (kind === FrameKind.window) {
      this.credit += payload.length === 4 ? payload.readUInt32BE(0) : 0;
      this.wakeWriter?.();
    } else if (kind === FrameKind.data) {
      this.ungranted += payload.length;
      if (this.push(payload)) this.grant();
    } else if (kind === FrameKind.end) {
      this.receivedEnd = true;
      const record = safeJson(payload);
      const failed = streamErrorSchema.safeParse(record);
      if (failed.success) {
        this.destroy(new StreamRefusedError(failed.data.error, failed.data.message));
        return;
      }
      this.settleEnded.resolve(typeof record === 'object' && record !== null ? (record as Record<string, unknown>) : {});
      this.push(null);
      if (this.sentEnd) this.forget();
    }
  }

  private grant(): void {
    if (this.ungranted === 0 || this.destroyed) return;
    const window = Buffer.alloc(4);
    window.writeUInt32BE(this.ungranted, 0);
    this.ungranted = 0;
    this.sendFrame(FrameKind.window, window);
  }

  override _read(): void {
    this.grant();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.send(chunk).then(() => done(), done);
  }

  private async send(chunk: Buffer): Promise<void> {
    let offset = 0;
    while (offset < chunk.length) {
      while (this.credit === 0) {
        await new Promise<void>((resolve) => (this.wakeWriter = resolve));
        this.wakeWriter = undefined;
        if (this.destroyed) throw new ChannelLostError('the stream ended');
      }
      const take = Math.min(this.credit, DATA_CHUNK_BYTES, chunk.length - offset);
      this.sendFrame(FrameKind.data, chunk.subarray(offset, offset + take));
      this.credit -= take;
      offset += take;
    }
  }

  override _final(done: (error?: Error | null) => void): void {
    this.sentEnd = true;
    this.sendFrame(FrameKind.end, Buffer.from('{}'));
    if (this.receivedEnd) this.forget();
    done();
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    if (!(this.sentEnd && this.receivedEnd)) {
      // The launcher gives up on it: an upload not finished leaves nothing, a tunnel is closed.
      if (!this.receivedEnd) this.sendFrame(FrameKind.end, Buffer.from(JSON.stringify({ error: 'aborted' })));
      this.sentEnd = this.receivedEnd = true;
    }
    this.forget();
    this.settleEnded.reject(error ?? new ChannelLostError('the stream was closed before its end'));
    this.wakeWriter?.();
    done(error);
  }

  /** What `http.request`'s `createConnection` expects of a socket beyond a Duplex. */
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  setTimeout(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}

interface Listener {
  server: Server;
  /** The socket file's identity (inode and change time): another process that replaced the file took the channel over. */
  identity?: string;
  connection?: Connection;
  /**
   * Every socket the server accepted and that is still open: the launcher's, one that has not said
   * hello yet, an older one. Closing the server waits for all of them, so closing ends them all.
   */
  sockets: Set<Socket>;
  /** Called when a launcher connects. */
  waiting: Set<() => void>;
}

/**
 * The host's end of every sandbox's channel: a unix socket listened on per sandbox, and the
 * launcher's connection on it when there is one.
 */
export class LauncherChannels {
  private readonly listeners = new Map<string, Listener>();
  private readonly listening = new Map<string, Promise<boolean>>();

  constructor(private readonly log: Logger) {}

  /**
   * Listens on `socketPath` for the launcher of sandbox `agentId`, unless another process (a
   * `berth runner` beside `berth up`) listens there: false then, and the caller execs through
   * `runsc exec`; asked again, it takes the socket over once that process is gone. A socket that
   * nobody answers on (left by a Berth process that ended) is replaced. Idempotent.
   */
  listen(agentId: string, socketPath: string): Promise<boolean> {
    // One at a time per sandbox: concurrent execs ask together.
    let listening = this.listening.get(agentId);
    if (listening === undefined) {
      listening = this.listenOnce(agentId, socketPath).finally(() => this.listening.delete(agentId));
      this.listening.set(agentId, listening);
    }
    return listening;
  }

  private async listenOnce(agentId: string, socketPath: string): Promise<boolean> {
    const current = this.listeners.get(agentId);
    if (current !== undefined) {
      if ((await fileIdentity(socketPath)) === current.identity) return true;
      await this.close(agentId);
    }
    await mkdir(dirname(socketPath), { recursive: true, mode: 0o700 });
    if (await answers(socketPath)) return false;
    // Bound under a name of its own, then renamed into place (atomically replacing a stale socket):
    // a server that closes unlinks the name it was bound to, which must never be another process's.
    const boundPath = join(dirname(socketPath), `.${randomBytes(4).toString('hex')}`);
    const listener: Listener = { server: createServer(), sockets: new Set(), waiting: new Set() };
    listener.server.unref();
    listener.server.on('connection', (socket) => {
      listener.sockets.add(socket);
      socket.once('close', () => listener.sockets.delete(socket));
      // A connection is the launcher's once it said hello (another process's probe never does).
      // The newest launcher's connection wins: an older one is from before a restore, or half-closed.
      new Connection(
        socket,
        (connection) => {
          if (listener.connection !== connection) listener.connection?.close();
          listener.connection = connection;
          for (const wake of listener.waiting) wake();
        },
        (ended) => {
          if (listener.connection === ended) listener.connection = undefined;
        },
        this.log.child({ agentId }),
      );
    });
    this.listeners.set(agentId, listener);
    await new Promise<void>((resolve, reject) => {
      listener.server.once('error', reject);
      listener.server.listen(boundPath, () => {
        listener.server.off('error', reject);
        resolve();
      });
    }).catch((error: unknown) => {
      this.listeners.delete(agentId);
      throw error;
    });
    listener.server.on('error', (error) => this.log.warn({ agentId, err: error }, "the sandbox's channel failed"));
    try {
      await rename(boundPath, socketPath);
    } catch (error) {
      await this.close(agentId);
      throw error;
    }
    listener.identity = await fileIdentity(socketPath);
    return true;
  }

  connected(agentId: string): boolean {
    return this.listeners.get(agentId)?.connection !== undefined;
  }

  /** Whether the sandbox's launcher is connected, waiting up to `waitMs` for it. */
  async awaitLauncher(agentId: string, waitMs: number): Promise<boolean> {
    const listener = this.listeners.get(agentId);
    if (listener === undefined) return false;
    if (listener.connection !== undefined) return true;
    await new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        listener.waiting.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, waitMs);
      listener.waiting.add(wake);
    });
    return listener.connection !== undefined;
  }

  /** Runs an exec on the sandbox's channel; undefined when no launcher is connected. */
  exec(agentId: string, request: ChannelExecRequest): Promise<ChannelExecResult> | undefined {
    return this.listeners.get(agentId)?.connection?.exec(request);
  }

  /** The sandbox's launcher connection, for terminal execs and background processes; undefined when none. */
  connection(agentId: string): Connection | undefined {
    return this.listeners.get(agentId)?.connection;
  }

  /** Stops listening for the sandbox (it ended or was checkpointed); its execs are lost. */
  async close(agentId: string): Promise<void> {
    const listener = this.listeners.get(agentId);
    if (listener === undefined) return;
    this.listeners.delete(agentId);
    listener.connection?.close();
    for (const wake of listener.waiting) wake();
    const closed = new Promise<void>((resolve) => listener.server.close(() => resolve()));
    // A launcher's connection that had not said hello yet (one that reconnected a moment ago)
    // would hold the server's close for good.
    for (const socket of listener.sockets) socket.destroy();
    await closed;
  }

  /** Stops listening for every sandbox (Berth is stopping; the launchers connect again to the next one). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.listeners.keys()].map((agentId) => this.close(agentId)));
  }
}

/** Which file is at `path` (an inode number may be used again at once), or undefined for none. */
async function fileIdentity(path: string): Promise<string | undefined> {
  const stats = await stat(path, { bigint: true }).catch(() => undefined);
  return stats && `${stats.dev}:${stats.ino}:${stats.ctimeNs}`;
}

/** Whether a process listens on the unix socket at `path`. */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(path);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
}

function safeJson(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString('utf8'));
  } catch {
    return undefined;
  }
}
