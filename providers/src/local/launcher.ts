/**
 * The launcher: the init (PID 1) of each sandbox, which starts the programs Berth execs, so that
 * they belong to the container's own process tree rather than to a `runsc exec`.
 *
 * Why: when runsc restores a checkpoint it kills every process that a `runsc exec` started, and
 * their descendants ("the caller is no longer connected"): gVisor marks a process's origin at
 * `runsc exec` and a fork inherits the mark. A background process an agent starts
 * (`nohup python3 server.py &`) would not survive a native checkpoint. Started by the launcher,
 * it does.
 *
 * Both are files of their own in `sandbox-images/guest/` (`launcher.py`, `launcher-client.pl`).
 * The guest folder is mounted read-only at /run/berth/guest, and PID 1 runs the launcher from
 * there.
 *
 * An exec goes over the launcher's channel (channel.ts, ADR 20): a connection the launcher makes
 * out to a unix socket the host listens on, with many execs on it at once and no host process per
 * call. The launcher starts the program in a session of its own with stdin from /dev/null (execs
 * never get input), sends its output as frames and then its outcome in a frame of its own; if the
 * host gives up on it (CANCEL, or the connection ends) the launcher kills the program's group.
 *
 * A sandbox without the channel (one an older Berth started or checkpointed) gets the first way
 * instead: the host runs `runsc exec … perl -e <client> -- <program…>`. The client is passed on the
 * command line, so it works in every sandbox. It connects to the launcher's abstract unix socket,
 * makes a pipe for each of the program's stdout and stderr and sends their descriptor numbers. The
 * launcher reads the client's argv (after `--`), environment and working directory from /proc,
 * opens the two pipes through /proc/<pid>/fd, starts the program, says `started`, and later sends
 * how the program ended as one line of JSON. The client copies the pipes to its own stdout and
 * stderr (runsc's connections to the host, which are sockets: /proc cannot open those) until the
 * outcome comes, then takes what is already in the pipes (a background child may keep them open
 * for hours), and writes the outcome as one length-prefixed JSON record on descriptor 3, a pipe of
 * the host's passed in with `runsc exec --pass-fd`: never in the program's output, where a program
 * could forge it. If the client goes away, the launcher kills the program's process group.
 *
 * As PID 1 it also reaps orphans (what tini did). It must never exit, or the sandbox ends. Unlike
 * Linux, gVisor delivers to init the signals it has no handler for when they come from its own
 * descendants (as every program now is), so it ignores every signal that would end it (programs
 * get them back at their defaults); its command line does not say
 * python, so that an agent's `pkill -9 -f python` passes it by (SIGKILL cannot be ignored); and
 * every event is handled under a catch-all that logs to the console. `/proc/self/comm` gets its
 * name too, so that `ps` in the sandbox says what it is.
 *
 * Cost over the channel: what starting the program costs in gVisor, within a millisecond or two
 * (ADR 20). Through the client: about 30 ms more, the host's `runsc exec` and the client (perl
 * without modules: perl-base is in every Debian system, and it starts as fast as bash). The
 * launcher is python because every image has python3, run with -I -S (no site packages, no
 * PYTHON* variables: a fast start), and it spawns with vfork.
 */

import { z } from 'zod';
import { guestSource, parseRecord } from '../guest.js';

/** The launcher's name in the sandbox, and its socket's in the abstract namespace (launcher.py). */
export const LAUNCHER_NAME = 'berth-launcher';

/** Where the sandbox sees the guest folder (read-only). */
export const GUEST_MOUNT = '/run/berth/guest';

/**
 * The container's main process: the launcher, under its own name (see above). With `tasksLimit`
 * it puts itself, and so every program it starts, in a pids cgroup of gVisor's own with that
 * limit (the sandbox must mount cgroupfs at /sys/fs/cgroup). With `egressRelay` it listens on the
 * egress relay's loopback port and starts the relay (egress-relay.py) at the first connection,
 * handing it the socket (ADR 49): a sandbox that never goes out never starts it.
 */
export function launcherArgs(tasksLimit?: number, options: { egressRelay?: boolean } = {}): string[] {
  const args = ['/bin/bash', '-c', `exec -a ${LAUNCHER_NAME} python3 -I -S "$0" "$@"`, `${GUEST_MOUNT}/launcher.py`];
  if (options.egressRelay) args.push('--egress-relay');
  return tasksLimit === undefined ? args : [...args, String(tasksLimit)];
}

/** The argv that `runsc exec` runs to have the launcher start `argv` inside the sandbox. */
export function viaLauncher(argv: readonly string[]): string[] {
  return ['perl', '-e', guestSource('launcher-client.pl'), '--', ...argv];
}

/**
 * The exec's environment entry that has the launcher stop the program after `timeoutMs`: TERM
 * to its process group, KILL two seconds later; its outcome then says `timedOut`. A launcher from
 * before this ignores it and leaves the limit to the host-side timer.
 */
export function launcherLimit(timeoutMs: number): Record<string, string> {
  return { BERTH_EXEC_LIMIT_MS: String(Math.max(1, Math.ceil(timeoutMs))) };
}

/** The descriptor on which the client writes the outcome record, in the client and on the host. */
export const OUTCOME_FD = 3;

export const outcomeSchema = z.discriminatedUnion('outcome', [
  /** The program exited by itself. */
  z.object({ outcome: z.literal('exited'), exitCode: z.number().int() }),
  /** A signal ended it; exitCode is 128 + signal, as a shell says. */
  z.object({ outcome: z.literal('signaled'), signal: z.number().int(), exitCode: z.number().int() }),
  /** The launcher stopped it at its limit; `signal` is the last one sent (a launcher before records does not say). */
  z.object({ outcome: z.literal('timedOut'), signal: z.number().int().optional(), exitCode: z.number().int() }),
  /** The launcher could not run it, or the client could not reach the launcher. */
  z.object({ outcome: z.literal('failed'), error: z.string() }),
]);

/** How an exec'd program ended, as the launcher reported it on its own channel. */
export type ExecOutcome = z.infer<typeof outcomeSchema>;

/**
 * The outcome record the client wrote on descriptor 3, or undefined when there is none (the client
 * never ran or died: runsc failed, the sandbox is dying) or it is not one.
 */
export function parseOutcome(channel: Buffer): ExecOutcome | undefined {
  const parsed = outcomeSchema.safeParse(parseRecord(channel));
  return parsed.success ? parsed.data : undefined;
}
