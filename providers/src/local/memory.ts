import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { writeFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { Logger } from '@berth/common';
import { cgroupsPath } from './bundle.js';
import type { Runsc } from './runsc.js';

/**
 * Out of memory in a local sandbox, answered as Linux answers it: the largest program is killed
 * (it exits 137), the sandbox and its other programs live on.
 *
 * gVisor enforces no memory limit inside (its cgroupfs `memory.limit_in_bytes` is a stub): the
 * host's memory cgroup does, on the sentry, and the host's OOM killer would take the sentry and
 * with it the sandbox. So the host helper (helpers/memory-events.py, one per Berth process)
 * switches that killer off for each watched sandbox and, when the sandbox's cgroup is out of
 * memory, lets it go past its limit by a headroom at once (at the limit, the sentry's control
 * server does not answer reliably) and reports it. The guard asks the sandbox's launcher over its
 * channel for the program with the most resident memory and has it killed (a few milliseconds);
 * without a channel it reads each program's resident size from the sandbox's /proc (`runsc read`: no
 * process is started) and kills the largest with `runsc kill --pid`. It waits for the program to
 * end, and sets the limit back. Out of memory again before that, the
 * sandbox gets a second headroom and the guard kills the largest program again; a third time, the
 * helper switches the kernel's OOM killer back on, which ends the sandbox as before (`onLost`).
 * Measured figures are in ADR 15.
 */
export interface MemoryGuardOptions {
  runsc: Runsc;
  log: Logger;
  /** The host's cgroup v1 memory hierarchy. */
  cgroupRoot?: string;
  python?: string;
  /**
   * The sandbox's launcher, asked over its channel (no process started, on the host or in the
   * sandbox): which program is largest, and its kill. Undefined, or a call that fails, and the guard
   * asks the sentry through `runsc` instead (three rounds of `runsc` processes, which on a loaded
   * host took long enough for a fast hog to use up both headrooms).
   */
  inside?: InsideRelief;
  /** Called with the sandbox's id when the kernel's OOM killer was left to end it. */
  onLost?: (containerId: string) => void;
}

export interface InsideRelief {
  /** The largest program (null: none but the launcher); undefined when the launcher cannot be asked. */
  largest(containerId: string): Promise<{ pid: number; command: string; residentBytes: number } | null | undefined>;
  /** Kills the program; false when the launcher could not. */
  kill(containerId: string, pid: number): Promise<boolean>;
}

/** What the guard killed in a sandbox, last. */
export interface OutOfMemoryKill {
  pid: number;
  command: string;
  residentBytes: number;
  limitBytes: number;
  /** `performance.now()` when it was killed. */
  at: number;
}

const HELPER = fileURLToPath(new URL('../../helpers/memory-events.py', import.meta.url));
const PAGE_BYTES = 4096;
/** How long a killed program's memory gets to come back to the host before the limit is left raised. */
const LIMIT_BACK_MS = 5_000;
const VICTIM_EXIT_MS = 5_000;
const HELPER_RESTART_MS = 1_000;
/** The launcher, which must never end (see launcher.ts). */
const INIT_PID = 1;

/**
 * What the cgroup may hold past its limit while the guard chooses and kills a program: half, at
 * least 64 MiB. A program that allocates as fast as gVisor lets it (~1 GB/s here) crosses a
 * quarter in 60-130 ms, and on a loaded host choosing and killing took up to 660 ms: with a
 * quarter, a hog after a fork loop used both headrooms first and its sandbox ended.
 */
export const headroomFor = (limitBytes: number) => Math.max(64 * 1024 ** 2, Math.floor(limitBytes / 2));

/** The command name and resident bytes in a line of /proc/<pid>/stat, or undefined for a zombie. Pure. */
export function parseStat(stat: string): { command: string; residentBytes: number } | undefined {
  const open = stat.indexOf('(');
  const close = stat.lastIndexOf(')');
  if (open < 0 || close < open) return undefined;
  // After the command: field 3 (state) onwards; rss is field 24, in pages.
  const fields = stat.slice(close + 2).trim().split(/\s+/);
  if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
  const pages = Number(fields[21]);
  return Number.isFinite(pages) ? { command: stat.slice(open + 1, close), residentBytes: pages * PAGE_BYTES } : undefined;
}

type Helper = ChildProcessByStdio<Writable, Readable, null>;

export class MemoryGuard {
  private helper: Helper | undefined;
  private stopped = false;
  /** Watched sandboxes and their memory limits: the state the helper is brought to. */
  private readonly limits = new Map<string, number>();
  private readonly relieving = new Map<string, Promise<void>>();
  private readonly pending = new Set<string>();
  private readonly kills = new Map<string, OutOfMemoryKill>();

  constructor(private readonly options: MemoryGuardOptions) {}

  /** Guards the sandbox's memory from now on (again: its limit may have changed). */
  watch(containerId: string, limitBytes: number): void {
    if (this.stopped) return;
    this.limits.set(containerId, limitBytes);
    this.send(this.watchMessage(containerId, limitBytes));
  }

  private watchMessage(containerId: string, limitBytes: number): Record<string, string | number> {
    return { watch: containerId, cgroup: this.cgroup(containerId), limit: limitBytes, headroom: headroomFor(limitBytes) };
  }

  unwatch(containerId: string): void {
    this.limits.delete(containerId);
    this.kills.delete(containerId);
    if (this.helper) this.send({ unwatch: containerId });
  }

  /** The last program the guard killed in the sandbox, if any. */
  lastKill(containerId: string): OutOfMemoryKill | undefined {
    return this.kills.get(containerId);
  }

  /** Ends the helper, which switches the kernel's OOM killer back on for every sandbox. */
  stop(): void {
    this.stopped = true;
    this.helper?.stdin.end();
    this.helper = undefined;
  }

  private cgroup(containerId: string): string {
    return join(this.options.cgroupRoot ?? '/sys/fs/cgroup/memory', cgroupsPath(containerId));
  }

  private send(message: Record<string, string | number>): void {
    (this.helper ?? this.startHelper()).stdin.write(`${JSON.stringify(message)}\n`);
  }

  /** Starts the helper, and has it watch every sandbox that should be. */
  private startHelper(): Helper {
    const { log } = this.options;
    const helper = spawn(this.options.python ?? 'python3', ['-I', '-S', HELPER], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.helper = helper;
    // It must not keep Berth running; it ends itself when its stdin closes.
    helper.unref();
    for (const stream of [helper.stdin, helper.stdout] as unknown as { unref?: () => void }[]) stream.unref?.();
    helper.stdin.on('error', () => undefined);
    helper.on('error', (error) => log.error({ err: error }, 'the memory events helper could not start: sandboxes end at their memory limit'));
    helper.on('exit', (code, signal) => {
      if (this.helper !== helper) return;
      this.helper = undefined;
      if (this.stopped) return;
      log.error({ code, signal }, 'the memory events helper ended; starting it again');
      setTimeout(() => {
        if (!this.stopped && !this.helper && this.limits.size > 0) this.startHelper();
      }, HELPER_RESTART_MS).unref();
    });
    createInterface({ input: helper.stdout }).on('line', (line) => this.received(line));
    for (const [containerId, limitBytes] of this.limits) {
      helper.stdin.write(`${JSON.stringify(this.watchMessage(containerId, limitBytes))}\n`);
    }
    return helper;
  }

  private received(line: string): void {
    const { log } = this.options;
    let message: { oom?: string; fallback?: string; gone?: string; error?: string; watching?: string; message?: string };
    try {
      message = JSON.parse(line);
    } catch {
      log.warn({ line }, 'the memory events helper said something that is not JSON');
      return;
    }
    if (message.oom !== undefined) this.relieve(message.oom);
    else if (message.gone !== undefined) this.limits.delete(message.gone);
    else if (message.fallback !== undefined) {
      this.limits.delete(message.fallback);
      log.error({ agentId: message.fallback }, 'out of memory a third time before a program was killed: the kernel ends the sandbox');
      this.options.onLost?.(message.fallback);
    }
    else if (message.error !== undefined) {
      log.warn({ agentId: message.error, error: message.message }, 'memory not guarded: the sandbox ends if a program exhausts its memory');
    }
  }

  /** Runs one relief of the sandbox at a time; an event during one has it run once more after. */
  private relieve(containerId: string): void {
    if (this.relieving.has(containerId)) {
      this.pending.add(containerId);
      return;
    }
    const run = this.freeMemory(containerId)
      .catch((error: unknown) => this.options.log.error({ agentId: containerId, err: error }, 'could not free the sandbox\'s memory'))
      .finally(() => {
        this.relieving.delete(containerId);
        if (this.pending.delete(containerId)) this.relieve(containerId);
      });
    this.relieving.set(containerId, run);
  }

  /**
   * Kills the largest program, once per report of the kernel's, and sets the limit back when the
   * cgroup is under it again. A cgroup still above its limit after the kill is not a reason to kill
   * another: gVisor gives a dead program's memory back to the host a moment later, not at once. It
   * gets a few seconds; a program that holds the memory still is killed at the next report, when
   * the headroom is used up.
   */
  private async freeMemory(containerId: string): Promise<void> {
    const { runsc, log } = this.options;
    const cgroup = this.cgroup(containerId);
    const limitBytes = this.limits.get(containerId);
    if (limitBytes === undefined) return;
    const started = performance.now();
    const inside = this.options.inside;
    const asked = inside ? await inside.largest(containerId).catch(() => undefined) : undefined;
    const by = asked === undefined ? 'runsc' : 'launcher';
    const victim = asked === undefined ? await this.largestProgram(containerId) : (asked ?? undefined);
    if (victim === undefined) {
      log.error({ agentId: containerId }, 'out of memory with no program to kill: the sandbox is left past its limit');
      return;
    }
    // Recorded first: the exec of the killed program may answer before the kill command returns.
    this.kills.set(containerId, { ...victim, limitBytes, at: started });
    const killedInside = by === 'launcher' && (await inside!.kill(containerId, victim.pid).catch(() => false));
    if (!killedInside) {
      await runsc.killProcess(containerId, victim.pid).catch((error: unknown) => log.warn({ agentId: containerId, err: error }, 'kill failed'));
    }
    const ended = await this.ended(containerId, victim.pid);
    const killedMs = Math.round(performance.now() - started);
    let restored = false;
    for (const deadline = performance.now() + LIMIT_BACK_MS; !restored && performance.now() < deadline; ) {
      restored = !(await underOom(cgroup)) && (await setLimit(cgroup, limitBytes));
      if (!restored) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (restored && this.helper && this.limits.has(containerId)) this.send({ relieved: containerId });
    log.warn(
      { agentId: containerId, pid: victim.pid, command: victim.command, residentBytes: victim.residentBytes, limitBytes, by, ended, killedMs, limitBackMs: restored ? Math.round(performance.now() - started) : null },
      'out of memory: killed the largest program in the sandbox',
    );
  }

  private async largestProgram(containerId: string): Promise<{ pid: number; command: string; residentBytes: number } | undefined> {
    const { runsc } = this.options;
    const pids = (await runsc.processes(containerId)).filter((pid) => pid !== INIT_PID);
    let largest: { pid: number; command: string; residentBytes: number } | undefined;
    for (let i = 0; i < pids.length; i += 8) {
      const batch = pids.slice(i, i + 8);
      const stats = await Promise.all(batch.map((pid) => runsc.readFile(containerId, `/proc/${pid}/stat`)));
      stats.forEach((stat, index) => {
        const program = stat === undefined ? undefined : parseStat(stat);
        if (program && (!largest || program.residentBytes > largest.residentBytes)) largest = { pid: batch[index]!, ...program };
      });
    }
    return largest;
  }

  /** Waits (at most a few seconds) until the process has ended; says whether it did. */
  private async ended(containerId: string, pid: number): Promise<boolean> {
    for (const deadline = performance.now() + VICTIM_EXIT_MS; performance.now() < deadline; ) {
      const stat = await this.options.runsc.readFile(containerId, `/proc/${pid}/stat`);
      if (stat === undefined || parseStat(stat) === undefined) return true;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return false;
  }
}

async function underOom(cgroup: string): Promise<boolean> {
  const control = await readFile(join(cgroup, 'memory.oom_control'), 'utf8').catch(() => '');
  return /^under_oom 1$/m.test(control);
}

/**
 * Sets the cgroup's memory limit; false when the kernel could not reclaim enough to bring the
 * cgroup under it (EBUSY), or the cgroup is gone.
 */
async function setLimit(cgroup: string, bytes: number): Promise<boolean> {
  try {
    await writeFile(join(cgroup, 'memory.limit_in_bytes'), String(bytes));
    return true;
  } catch {
    return false;
  }
}
