import { closeSync, openSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { armChecked, runProcess, type ArmedStep, type RunResult, type SpareProcesses } from './process.js';

export type ContainerStatus = 'creating' | 'created' | 'running' | 'stopped' | 'paused';

export class RunscError extends Error {
  constructor(
    readonly operation: string,
    readonly result: RunResult,
  ) {
    super(`runsc ${operation} failed (exit ${result.exitCode}): ${result.stderr.trim().split('\n').slice(-3).join(' | ')}`);
    this.name = 'RunscError';
  }
}

export interface RunscOptions {
  binary: string;
  /** runsc's state directory (`--root`); one per Berth data directory. */
  stateDir: string;
  network: 'none' | 'host';
  /** Largest the in-memory writable layer over the image may grow; writes past it fail with ENOSPC. */
  overlayBytes: number;
  /** Where `checkpoint` and `armDelete` take their process from, rather than forking this one on the pause's path. */
  spares?: SpareProcesses;
}

/** The runsc command line, one method per subcommand Berth uses. */
export class Runsc {
  constructor(private readonly options: RunscOptions) {}

  private globalFlags(): string[] {
    return [`--root=${this.options.stateDir}`, `--network=${this.options.network}`];
  }

  run(containerId: string, bundleDir: string, consoleLog: string): Promise<void> {
    return this.startDetached('run', [`--bundle=${bundleDir}`, containerId], consoleLog);
  }

  /** Starts a container from a checkpoint image, as `run` starts one from its bundle. */
  restore(containerId: string, bundleDir: string, imageDir: string, consoleLog: string): Promise<void> {
    return this.startDetached('restore', [`--bundle=${bundleDir}`, `--image-path=${imageDir}`, containerId], consoleLog);
  }

  /**
   * Saves the container's processes and memory into `imageDir`; the container stops. The image is
   * not compressed: the snapshot archive that carries it is.
   */
  async checkpoint(containerId: string, imageDir: string): Promise<void> {
    const result = await runProcess(this.options.binary, [...this.globalFlags(), 'checkpoint', `--image-path=${imageDir}`, containerId], {
      timeoutMs: 10 * 60_000,
      ...(this.options.spares ? { spares: this.options.spares } : {}),
    });
    if (result.exitCode !== 0) throw new RunscError('checkpoint', result);
  }

  /**
   * `run` and `restore` with the same sandbox flags: a restored sandbox must get the root overlay in
   * memory and the network of the one that was checkpointed. `--host-uds=open` lets the launcher
   * connect to the host's end of its channel, a unix socket in a mounted host directory (channel.ts);
   * it cannot create sockets on the host.
   */
  private async startDetached(subcommand: 'run' | 'restore', args: string[], consoleLog: string): Promise<void> {
    // A detached sandbox keeps the caller's stdio open for its lifetime: give it a file, never our pipes.
    // It also gets its own session, so a Ctrl-C at Berth's terminal does not reach it.
    const log = openSync(consoleLog, 'a');
    try {
      const result = await runProcess(
        this.options.binary,
        [...this.globalFlags(), `--overlay2=root:memory,size=${this.options.overlayBytes}`, '--host-uds=open', subcommand, '--detach', ...args],
        { stdio: ['ignore', log, log], detached: true, timeoutMs: 60_000 },
      );
      if (result.exitCode !== 0) throw new RunscError(subcommand, { ...result, stderr: await tail(consoleLog) });
    } finally {
      closeSync(log);
    }
  }

  /**
   * The container's status, or `undefined` when runsc does not know it. A sandbox whose process
   * has died is `stopped`, whatever runsc says: runsc asks with signal 0, which a zombie answers,
   * and a detached sandbox's parent is the host's init, which may reap it only many seconds later.
   * Read from runsc's state file, as `runsc state` reads it: asking runsc costs a process (about
   * 10 ms, and a fork of this process) in every reconcile of a running agent, which a pause or
   * resume asked meanwhile waits for. `runsc state` answers when the file cannot be read whole
   * (runsc was writing it).
   */
  async state(containerId: string): Promise<ContainerStatus | undefined> {
    // runsc keeps one state file per container in its root: without one, runsc does not know it.
    const file = await this.stateFile(containerId);
    if (file === undefined) return undefined;
    const recorded = await readStateFile(join(this.options.stateDir, file));
    if (recorded === 'gone') return undefined;
    const { status, pid } = recorded ?? (await this.askState(containerId)) ?? {};
    if (status === undefined) return undefined;
    if ((status === 'running' || status === 'created') && pid !== undefined && !(await isAlive(pid))) return 'stopped';
    return status;
  }

  private async askState(containerId: string): Promise<RecordedState | undefined> {
    const result = await runProcess(this.options.binary, [...this.globalFlags(), 'state', containerId], { timeoutMs: 30_000 });
    if (result.exitCode !== 0) {
      if (/does not exist|not found/i.test(result.stderr)) return undefined;
      throw new RunscError('state', result);
    }
    return JSON.parse(result.stdout) as RecordedState;
  }

  private async stateFile(containerId: string): Promise<string | undefined> {
    const names = await readdir(this.options.stateDir).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [];
      throw error;
    });
    // `<sandbox id>_sandbox:<container id>.state`; its sandbox is named after the container.
    return names.find((name) => name.endsWith(`_sandbox:${containerId}.state`));
  }

  exec(
    containerId: string,
    argv: readonly string[],
    options: {
      cwd: string;
      env: Record<string, string>;
      stdin: string;
      timeoutMs: number;
      maxOutputBytes: number;
      /** Passes a pipe in as the program's descriptor 3, whose bytes come back in the result's `channel`. */
      channel?: boolean;
    },
  ): Promise<RunResult> {
    const env = Object.entries(options.env).flatMap(([key, value]) => ['--env', `${key}=${value}`]);
    const channel = options.channel ? ['--pass-fd=3:3'] : [];
    return runProcess(
      this.options.binary,
      [...this.globalFlags(), 'exec', `--cwd=${options.cwd}`, ...env, ...channel, containerId, ...argv],
      { stdin: options.stdin, timeoutMs: options.timeoutMs, maxOutputBytes: options.maxOutputBytes, channel: options.channel },
    );
  }

  /** The ids of the containers in this state directory that runsc says are running. */
  async running(): Promise<string[]> {
    const result = await runProcess(this.options.binary, [...this.globalFlags(), 'list', '--format=json'], { timeoutMs: 30_000 });
    if (result.exitCode !== 0) throw new RunscError('list', result);
    const containers = (JSON.parse(result.stdout || '[]') ?? []) as { id: string; status: ContainerStatus }[];
    return containers.filter((container) => container.status === 'running').map((container) => container.id);
  }

  /** The pids of the container's processes, as the sandbox numbers them. */
  async processes(containerId: string): Promise<number[]> {
    const result = await runProcess(this.options.binary, [...this.globalFlags(), 'ps', '--format=json', containerId], { timeoutMs: 10_000 });
    if (result.exitCode !== 0) throw new RunscError('ps', result);
    return JSON.parse(result.stdout) as number[];
  }

  /**
   * A file of the sandbox, read by the sentry itself: no process is started in the sandbox, so it
   * answers while the sandbox's programs wait for memory. Undefined when it cannot be read.
   */
  async readFile(containerId: string, path: string): Promise<string | undefined> {
    const result = await runProcess(this.options.binary, [...this.globalFlags(), 'read', containerId, path], { timeoutMs: 10_000 });
    return result.exitCode === 0 ? result.stdout : undefined;
  }

  /** Sends a signal to one process of the container (a pid as the sandbox numbers it). */
  async killProcess(containerId: string, pid: number, signal = 'KILL'): Promise<void> {
    const result = await runProcess(this.options.binary, [...this.globalFlags(), 'kill', `--pid=${pid}`, containerId, signal], { timeoutMs: 10_000 });
    if (result.exitCode !== 0) throw new RunscError('kill', result);
  }

  async kill(containerId: string, signal = 'KILL'): Promise<void> {
    await runProcess(this.options.binary, [...this.globalFlags(), 'kill', '--all', containerId, signal], { timeoutMs: 30_000 });
  }

  /** Deletes the container and its runsc state; a container that is already gone is fine. */
  async delete(containerId: string): Promise<void> {
    deleted(await runProcess(this.options.binary, this.deleteArgs(containerId), { timeoutMs: DELETE_TIMEOUT_MS }));
  }

  /** `delete`, its process created now (while a checkpoint runs) to run once the checkpoint is done; see `armProcess`. */
  armDelete(containerId: string): ArmedStep {
    return armChecked(this.options.binary, this.deleteArgs(containerId), { timeoutMs: DELETE_TIMEOUT_MS, ...(this.options.spares ? { spares: this.options.spares } : {}) }, deleted);
  }

  private deleteArgs(containerId: string): string[] {
    return [...this.globalFlags(), 'delete', '--force', containerId];
  }

  async version(): Promise<string> {
    const result = await runProcess(this.options.binary, ['--version'], { timeoutMs: 10_000 });
    if (result.exitCode !== 0) throw new RunscError('--version', result);
    return result.stdout.split('\n')[0]?.trim() ?? '';
  }
}

const DELETE_TIMEOUT_MS = 30_000;

interface RecordedState {
  status: ContainerStatus;
  /** The sandbox's process. */
  pid?: number;
}

const STATUSES: readonly string[] = ['creating', 'created', 'running', 'stopped', 'paused'] satisfies ContainerStatus[];

/**
 * A container's status and its sandbox's process from runsc's state file (`{ status, sandbox: {
 * pid } }`); 'gone' when the file went meanwhile, undefined when it cannot be read whole or holds
 * something else (runsc rewrites it in place).
 */
export async function readStateFile(path: string): Promise<RecordedState | 'gone' | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw error;
  }
  try {
    const state = JSON.parse(text) as { status?: unknown; sandbox?: { pid?: unknown } };
    if (typeof state.status !== 'string' || !STATUSES.includes(state.status)) return undefined;
    const pid = state.sandbox?.pid;
    return { status: state.status as ContainerStatus, ...(typeof pid === 'number' && pid > 0 ? { pid } : {}) };
  } catch {
    return undefined;
  }
}

function deleted(result: RunResult): void {
  if (result.exitCode !== 0 && !/does not exist|not found/i.test(result.stderr)) throw new RunscError('delete', result);
}

/** Whether the process exists and is not a zombie, from its /proc/<pid>/stat. */
async function isAlive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (stat === undefined) return false;
  // The state is the field after the command name, which is in parentheses and may hold anything.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

async function tail(path: string): Promise<string> {
  const text = await readFile(path, 'utf8').catch(() => '');
  return text.split('\n').slice(-20).join('\n');
}
