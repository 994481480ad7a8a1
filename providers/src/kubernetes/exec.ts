import { PassThrough, Readable, Writable } from 'node:stream';
import { Exec, type KubeConfig, type V1Status } from '@kubernetes/client-node';
import { OutputLimit } from '../program.js';

export interface PodExecResult {
  stdout: string;
  stderr: string;
  /** The last bytes of stderr (up to 4 KiB), whatever the limit kept of it. */
  stderrTail: string;
  exitCode: number;
  timedOut: boolean;
  durationMs: number;
}

/** A writable end for the exec's output streams, kept within a byte limit. */
class BoundedSink extends Writable {
  private readonly output: OutputLimit;
  constructor(
    limit: number,
    private readonly onChunk?: (chunk: Buffer) => void,
  ) {
    super();
    this.output = new OutputLimit(limit);
  }
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.output.push(chunk);
    this.onChunk?.(chunk);
    done();
  }
  text(): string {
    return this.output.text();
  }
  tail(): string {
    return this.output.tail();
  }
}

/** The exit code in an exec status: 0 on Success, the `ExitCode` cause otherwise. */
export function exitCodeOf(status: V1Status): number {
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((entry) => entry.reason === 'ExitCode');
  if (cause?.message !== undefined && /^\d+$/.test(cause.message)) return Number(cause.message);
  throw new Error(`exec failed: ${status.message ?? status.reason ?? 'unknown error'}`);
}

type ExecTarget = { namespace: string; pod: string; container: string };

/**
 * Starts the command over the exec subresource and waits for what ends it: the status channel
 * (which carries the exit code), a socket that closed or failed first, or `timeoutMs`.
 */
async function awaitExec(
  kubeConfig: KubeConfig,
  target: ExecTarget,
  command: string[],
  streams: { stdout: Writable | null; stderr: Writable; stdin: Readable | null },
  timeoutMs: number,
): Promise<V1Status | 'timeout' | Error> {
  let settle!: (status: V1Status | 'timeout' | Error) => void;
  const outcome = new Promise<V1Status | 'timeout' | Error>((resolve) => (settle = resolve));
  const socket = await new Exec(kubeConfig).exec(
    target.namespace,
    target.pod,
    target.container,
    command,
    streams.stdout,
    streams.stderr,
    streams.stdin,
    false,
    (status) => settle(status),
  );
  socket.on('close', () => settle(new Error('the exec connection closed before the command reported its status')));
  socket.on('error', (error: Error) => settle(error));
  const timer = setTimeout(() => settle('timeout'), timeoutMs);
  const result = await outcome;
  clearTimeout(timer);
  socket.close();
  return result;
}

/**
 * Runs a command in a pod through the API server's exec subresource and waits for the status
 * channel, which carries the exit code: the socket opening (when `Exec.exec` resolves) says
 * nothing about the command, and closing it does not stop the command either.
 */
export async function execInPod(
  kubeConfig: KubeConfig,
  target: ExecTarget,
  command: string[],
  options: { stdin: string | Buffer; timeoutMs: number; maxOutputBytes: number; onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void },
): Promise<PodExecResult> {
  const started = performance.now();
  const { onOutput } = options;
  const stdout = new BoundedSink(options.maxOutputBytes, onOutput && ((chunk) => onOutput('stdout', chunk)));
  const stderr = new BoundedSink(options.maxOutputBytes, onOutput && ((chunk) => onOutput('stderr', chunk)));
  const stdin = Readable.from([Buffer.from(options.stdin)]);
  const result = await awaitExec(kubeConfig, target, command, { stdout, stderr, stdin }, options.timeoutMs);
  const durationMs = Math.round(performance.now() - started);
  const output = { stdout: stdout.text(), stderr: stderr.text(), stderrTail: stderr.tail(), durationMs };
  if (result === 'timeout') return { ...output, exitCode: -1, timedOut: true };
  if (result instanceof Error) throw result;
  return { ...output, exitCode: exitCodeOf(result), timedOut: false };
}

/**
 * Runs a command in a pod with its stdin from `stdin` and its stdout into `stdout`, streamed
 * both ways (an archive going in or out), and resolves with the exit code once the status
 * channel reports it. stderr is kept (bounded) for the error message.
 */
export async function streamInPod(
  kubeConfig: KubeConfig,
  target: ExecTarget,
  command: string[],
  options: { stdin?: Readable; stdout?: Writable; timeoutMs: number },
): Promise<{ exitCode: number; stderr: string }> {
  const stderr = new BoundedSink(64 * 1024);
  // The exec client ends its stdout sink when the command ends; a PassThrough keeps the
  // caller's stream open until everything written has been consumed.
  const stdout = options.stdout ? new PassThrough() : null;
  if (stdout && options.stdout) stdout.pipe(options.stdout);
  const result = await awaitExec(kubeConfig, target, command, { stdout, stderr, stdin: options.stdin ?? null }, options.timeoutMs);
  if (result === 'timeout') throw new Error(`the command did not finish within ${Math.round(options.timeoutMs / 1000)}s`);
  if (result instanceof Error) throw result;
  return { exitCode: exitCodeOf(result), stderr: stderr.text() };
}
