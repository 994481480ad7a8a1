import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
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
  /**
   * Takes the program's process from these spares rather than forking this one for it (see
   * `SpareProcesses`); only for a program with the default stdio and no input.
   */
  spares?: SpareProcesses;
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
  const spare = canExecLater(command, args, options) ? options.spares?.take() : undefined;
  return spare ? launch(command, args, options, Promise.resolve(true), spare) : launch(command, args, options);
}

/**
 * The shell of a process made before its program is known: it reads from its stdin how many words
 * follow, then the program and its arguments, one a line, and execs them. Given none (a cancel, or
 * the end of this process) or fewer than it was told (this process ended while writing them), it
 * exits 1 without running anything.
 */
const EXEC_FROM_STDIN = 'IFS= read -r count || exit 1; while [ "$#" -lt "$count" ] && IFS= read -r arg; do set -- "$@" "$arg"; done; [ "$#" -gt 0 ] && [ "$#" -eq "$count" ] && exec "$@"';

function execLater(): ChildProcess {
  return spawn('sh', ['-c', EXEC_FROM_STDIN, 'sh'], { stdio: ['pipe', 'pipe', 'pipe'] });
}

/** Whether the program can be handed to a shell of `EXEC_FROM_STDIN`: its stdin carries the program, so it gets none of its own. */
function canExecLater(command: string, args: readonly string[], options: RunOptions): boolean {
  return options.stdio === undefined && !options.channel && !options.detached && !options.stdin && ![command, ...args].some((word) => word.includes('\n'));
}

/**
 * Processes made ahead of need, each a shell waiting to be handed a program (`EXEC_FROM_STDIN`).
 * Creating a process forks this one, which holds the event loop for milliseconds, the more the
 * larger this process is (10–25 ms for Berth's on a loaded two-core machine), and takes a core
 * meanwhile: a program whose start is on a path that is timed (the pause's `runsc checkpoint`)
 * takes a spare instead, and the owner makes the spares again (`fill`) when nothing timed runs.
 * With none left, a program forks as it would without spares. Idle spares do not keep this process
 * alive, and end when it does (their stdin closes).
 */
export class SpareProcesses {
  private readonly idle: ChildProcess[] = [];
  private stopped = false;

  constructor(private readonly count: number) {}

  /** Makes the missing spares (a fork of this process each). */
  fill(): void {
    while (!this.stopped && this.idle.length < this.count) {
      const child = execLater();
      child.on('error', () => undefined); // could not be made: it has no pid, and take() passes it by
      child.unref();
      for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as unknown as { unref?: () => void } | null)?.unref?.();
      this.idle.push(child);
    }
  }

  /** A spare, alive, no longer idle; undefined when none is left. */
  take(): ChildProcess | undefined {
    let spare: ChildProcess | undefined;
    while (spare === undefined && this.idle.length > 0) {
      const child = this.idle.shift()!;
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) spare = child;
    }
    if (spare) {
      spare.ref();
      for (const stream of [spare.stdin, spare.stdout, spare.stderr]) (stream as unknown as { ref?: () => void } | null)?.ref?.();
    }
    return spare;
  }

  /** Ends the idle spares and makes no more. */
  stop(): void {
    this.stopped = true;
    for (const child of this.idle.splice(0)) child.stdin?.end();
  }
}

/** A program whose process exists already and which runs on `run()`; see `armProcess`. */
export interface ArmedProcess {
  /** Runs the program now; resolves as `runProcess` does. */
  run(): Promise<RunResult>;
  /** Lets the waiting process go without running the program (its result: exit 1). */
  cancel(): void;
}

/**
 * Creates the process of a program now, to run it later: a shell (`EXEC_FROM_STDIN`) that is
 * handed the program on the go-ahead and execs it. Creating a process forks this one, which holds
 * the event loop for milliseconds (the more, the larger the process is); a pause arms what has to
 * follow its checkpoint while runsc writes it, so that only the programs themselves follow (with
 * `spares`, the process is a spare, and nothing is forked now). The time limit counts from
 * `run()`. Every armed process must be run or cancelled.
 */
export function armProcess(command: string, args: readonly string[], options: Omit<RunOptions, 'stdin'> = {}): ArmedProcess {
  let decide: (run: boolean) => void = () => undefined;
  const goAhead = new Promise<boolean>((resolve) => (decide = resolve));
  if (!canExecLater(command, args, options)) throw new Error(`armProcess: ${command} cannot be handed to a waiting shell (its own stdio, or a newline in an argument)`);
  const result = launch(command, args, options, goAhead, options.spares?.take() ?? execLater());
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

/**
 * Runs the program: in a process forked for it now, or, with `waiting`, in that shell of
 * `EXEC_FROM_STDIN`, handed the program on the go-ahead (nothing, on a cancel).
 */
function launch(command: string, args: readonly string[], options: RunOptions, goAhead?: Promise<boolean>, waiting?: ChildProcess): Promise<RunResult> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child =
      waiting ??
      spawn(command, args, {
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
      const program = [String(args.length + 1), command, ...args].map((word) => `${word}\n`).join('');
      void goAhead.then((run) => {
        if (run) startTimer();
        child.stdin?.end(run ? program : '');
      });
    }
  });
}
