import { spawn, type SpawnOptions } from 'node:child_process';
import { OutputLimit } from '../program.js';

export interface RunOptions {
  stdin?: string;
  timeoutMs?: number;
  /** Bytes kept of each of stdout and stderr; the rest is dropped and marked. */
  maxOutputBytes?: number;
  detached?: boolean;
  stdio?: SpawnOptions['stdio'];
  /** Gives the program a fourth pipe (descriptor 3) for a result of its own: its bytes come back in `channel`. */
  channel?: boolean;
  /** Called with each complete line of stderr as it arrives (progress of long commands). */
  onStderrLine?: (line: string) => void;
}

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  durationMs: number;
  /** What the program wrote on descriptor 3, with `channel` (at most 64 KiB). */
  channel?: Buffer;
}

const DEFAULT_MAX_OUTPUT = 1024 * 1024;
const DRAIN_AFTER_EXIT_MS = 50;
const MAX_CHANNEL_BYTES = 64 * 1024;

/** Runs a program to completion, with its output bounded and a hard time limit. */
export function runProcess(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: options.stdio ?? (options.channel ? ['pipe', 'pipe', 'pipe', 'pipe'] : ['pipe', 'pipe', 'pipe']),
      detached: options.detached ?? false,
    });
    const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    const stdout = new OutputLimit(limit);
    const stderr = new OutputLimit(limit);
    child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
    const channelStream = options.channel ? child.stdio[3] : undefined;
    const channel: Buffer[] = [];
    let channelBytes = 0;
    channelStream?.on('data', (chunk: Buffer) => {
      if (channelBytes + chunk.length <= MAX_CHANNEL_BYTES) channel.push(chunk);
      channelBytes += chunk.length;
    });
    if (options.onStderrLine) {
      let pending = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        const lines = (pending + chunk.toString('utf8')).split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) if (line.trim()) options.onStderrLine!(line);
      });
    }
    let timedOut = false;
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            child.kill('SIGKILL');
          }, options.timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    // Resolve when the program exits, not when its output pipes close: a background process it
    // started may hold them open for hours. Output already written is drained for a moment first.
    let settled = false;
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.stdout?.destroy();
      child.stderr?.destroy();
      channelStream?.destroy();
      resolve({
        stdout: stdout.text(),
        stderr: stderr.text(),
        exitCode: code ?? (signal ? 128 : -1),
        signal,
        timedOut,
        durationMs: Math.round(performance.now() - started),
        ...(channelStream ? { channel: Buffer.concat(channel) } : {}),
      });
    };
    child.on('close', finish);
    child.on('exit', (code, signal) => setTimeout(() => finish(code, signal), DRAIN_AFTER_EXIT_MS).unref());
    if (child.stdin) {
      child.stdin.on('error', () => undefined); // a program that exits without reading its input
      child.stdin.end(options.stdin ?? '');
    }
  });
}
