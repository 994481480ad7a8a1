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
  return launch(command, args, options);
}

/** A program whose process exists already and which runs on `run()`; see `armProcess`. */
export interface ArmedProcess {
  /** Runs the program now; resolves as `runProcess` does. */
  run(): Promise<RunResult>;
  /** Lets the waiting process go without running the program (its result: exit 1). */
  cancel(): void;
}

/**
 * Creates the process of a program now, to run it later: a shell waits for the go-ahead on its
 * stdin, then execs the program. Creating a process forks this one, which holds the event loop
 * for milliseconds (the more, the larger the process is); a pause arms what has to follow its
 * checkpoint while runsc writes it, so that only the programs themselves follow. The time limit
 * counts from `run()`. Every armed process must be run or cancelled.
 */
export function armProcess(command: string, args: readonly string[], options: Omit<RunOptions, 'stdin'> = {}): ArmedProcess {
  let decide: (run: boolean) => void = () => undefined;
  const goAhead = new Promise<boolean>((resolve) => (decide = resolve));
  const result = launch('sh', ['-c', 'read -r go && [ "$go" = run ] && exec "$@"', 'sh', command, ...args], options, goAhead);
  result.catch(() => undefined); // reported by run(); a cancelled program's failure matters to no one
  return {
    run() {
      decide(true);
      return result;
    },
    cancel() {
      decide(false);
    },
  };
}

/** An armed program whose result is judged: `run()` throws for what `check` calls a failure. */
export interface ArmedStep {
  run(): Promise<void>;
  cancel(): void;
}

/** `armProcess`, its result judged by `check` (which throws for a failure). */
export function armChecked(command: string, args: readonly string[], options: Omit<RunOptions, 'stdin'>, check: (result: RunResult) => void): ArmedStep {
  const armed = armProcess(command, args, options);
  return { run: async () => check(await armed.run()), cancel: () => armed.cancel() };
}

function launch(command: string, args: readonly string[], options: RunOptions, goAhead?: Promise<boolean>): Promise<RunResult> {
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
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const startTimer = () => {
      if (options.timeoutMs === undefined || settled) return;
      timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, options.timeoutMs);
    };
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    // Resolve when the program exits, not when its output pipes close: a background process it
    // started may hold them open for hours. Output already written is drained for a moment first.
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
    if (child.stdin) child.stdin.on('error', () => undefined); // a program that exits without reading its input
    if (goAhead === undefined) {
      startTimer();
      child.stdin?.end(options.stdin ?? '');
    } else {
      void goAhead.then((run) => {
        if (run) startTimer();
        child.stdin?.end(run ? 'run\n' : '');
      });
    }
  });
}
