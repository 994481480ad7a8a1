import type { Compute } from '@berth/crds';
import { CHANNEL_MOUNT } from './channel.js';
import { EGRESS_MOUNT, egressEnv } from './egress/sandbox.js';
import { GUEST_MOUNT, launcherArgs } from './launcher.js';

/** What one local sandbox looks like; `sandboxSpec` turns it into an OCI runtime spec. */
export interface SandboxSpecInput {
  containerId: string;
  /** The image's name, and the compute the agent asked for (browser agents run the browser image). */
  image: string;
  compute: Compute;
  rootfs: string;
  workspace: string;
  /** Host directory the provider writes exec'd programs into, mounted read-only. */
  execDir: string;
  /** Host directory of the guest programs (the launcher among them), mounted read-only. */
  guestDir: string;
  /**
   * Host directory of the host's end of the launcher's channel (channel.ts), mounted read-only;
   * without it the launcher has no channel and execs go through `runsc exec` (as for sandboxes of
   * an older Berth).
   */
  channelDir?: string;
  /**
   * Host directory of the sandbox's egress folder (egress/sandbox.ts), mounted read-only: with it
   * the sandbox runs the egress relay and its clients use the egress proxy (ADR 46).
   */
  egressDir?: string;
  env: Record<string, string>;
  cpus: number;
  memoryBytes: number;
  /** Size of the sandbox's /tmp (in its memory). */
  tmpBytes: number;
  /** Processes and threads the sandbox's programs may have at once. */
  tasksLimit?: number;
}

export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Where the host puts exec'd programs; read-only inside the sandbox. */
export const EXEC_MOUNT = '/run/berth/exec';
const WORKSPACE = '/workspace';
/** Annotations that say what the sandbox was made from, for a snapshot's manifest. */
export const IMAGE_ANNOTATION = 'berth.dev/image';
export const COMPUTE_ANNOTATION = 'berth.dev/compute';
/**
 * The names (comma-separated) of the environment variables that hold the agent's secrets: a
 * snapshot's manifest keeps the names only, and a restore puts the current values back.
 */
export const SECRET_ENV_ANNOTATION = 'berth.dev/secret-env';
const CAPABILITIES = ['CAP_AUDIT_WRITE', 'CAP_KILL', 'CAP_NET_BIND_SERVICE'];
const CPU_PERIOD_US = 100_000;
/**
 * Each process in the sandbox costs its sentry host memory: about 0.3 MB for an idle `sleep`, 1-2
 * MB for a forked python3 (measured: 1500 sleeps took 480 MB; 256 python children ended a 512 MiB
 * sandbox that had written 128 MiB to its in-memory filesystems). One task per 4 MiB of the memory
 * limit (256 for 1 GiB), at most 1024, keeps a fork loop from ending the sandbox through its memory.
 */
const tasksLimitFor = (memoryBytes: number) => Math.max(64, Math.min(1024, Math.floor(memoryBytes / (4 * 1024 ** 2))));
/**
 * The host's pids limit counts the threads of gVisor's sentry, and the sentry dies when it cannot
 * make one: it is a backstop well above what the task limit inside lets programs cause.
 */
const HOST_THREADS_PER_TASK = 4;

/**
 * The OCI runtime spec of a local sandbox: the image's root filesystem shared by every sandbox
 * (runsc overlays it in memory, so the agent can write anywhere without changing it), the agent's own
 * `/workspace` from the host, and the launcher as PID 1 (it starts exec'd programs and reaps orphans).
 * Pure: the same input always gives the same spec.
 */
export function sandboxSpec(input: SandboxSpecInput): Record<string, unknown> {
  const env = { PATH: SANDBOX_PATH, HOME: '/root', LANG: 'C.UTF-8', ...(input.egressDir === undefined ? {} : egressEnv()), ...input.env };
  const launcher = launcherArgs(input.tasksLimit ?? tasksLimitFor(input.memoryBytes), { egressRelay: input.egressDir !== undefined });
  return {
    ociVersion: '1.0.0',
    process: {
      user: { uid: 0, gid: 0 },
      args: launcher,
      env: Object.entries(env).map(([key, value]) => `${key}=${value}`),
      cwd: WORKSPACE,
      noNewPrivileges: true,
      capabilities: Object.fromEntries(
        ['bounding', 'effective', 'inheritable', 'permitted'].map((set) => [set, CAPABILITIES]),
      ),
      rlimits: [{ type: 'RLIMIT_NOFILE', hard: 4096, soft: 4096 }],
    },
    // Not read-only: runsc's --overlay2=root:memory puts the sandbox's writes in its own memory,
    // so the shared image on disk stays untouched while tools can write anywhere (HOME, caches).
    root: { path: input.rootfs, readonly: false },
    hostname: 'sandbox',
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs' },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      // gVisor's own cgroups, in which the launcher limits the programs' tasks.
      { destination: '/sys/fs/cgroup', type: 'cgroup', source: 'cgroup', options: ['nosuid', 'noexec', 'nodev'] },
      // Without a mount of its own, runsc gives /tmp a tmpfs without a size limit: a large file there
      // would exhaust the sandbox's memory and end it, where this one fails the write with ENOSPC.
      { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777', `size=${input.tmpBytes}`] },
      { destination: WORKSPACE, type: 'bind', source: input.workspace, options: ['rbind', 'rw'] },
      { destination: EXEC_MOUNT, type: 'bind', source: input.execDir, options: ['rbind', 'ro'] },
      { destination: GUEST_MOUNT, type: 'bind', source: input.guestDir, options: ['rbind', 'ro'] },
      ...(input.channelDir === undefined ? [] : [{ destination: CHANNEL_MOUNT, type: 'bind', source: input.channelDir, options: ['rbind', 'ro'] }]),
      ...(input.egressDir === undefined ? [] : [{ destination: EGRESS_MOUNT, type: 'bind', source: input.egressDir, options: ['rbind', 'ro'] }]),
    ],
    annotations: {
      [IMAGE_ANNOTATION]: input.image,
      [COMPUTE_ANNOTATION]: input.compute,
      ...(Object.keys(input.env).length > 0 ? { [SECRET_ENV_ANNOTATION]: Object.keys(input.env).sort().join(',') } : {}),
    },
    linux: {
      namespaces: [{ type: 'pid' }, { type: 'network' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }],
      cgroupsPath: cgroupsPath(input.containerId),
      resources: {
        memory: { limit: input.memoryBytes },
        cpu: { quota: Math.round(input.cpus * CPU_PERIOD_US), period: CPU_PERIOD_US },
        pids: { limit: (input.tasksLimit ?? tasksLimitFor(input.memoryBytes)) * HOST_THREADS_PER_TASK },
      },
    },
  };
}

/** Where a restored sandbox's host directories are, and the current values of its secrets. */
export interface SandboxPlace {
  containerId: string;
  workspace: string;
  execDir: string;
  guestDir: string;
  channelDir: string;
  egressDir?: string;
  env: Record<string, string>;
}

interface SavedSpec {
  process?: { env?: string[] };
  mounts?: { destination: string; source?: string }[];
  annotations?: Record<string, string>;
  linux?: { cgroupsPath?: string };
}

/** The names of the spec's environment variables that hold secrets. Pure. */
export function secretEnvNames(spec: Record<string, unknown>): string[] {
  const names = (spec as SavedSpec).annotations?.[SECRET_ENV_ANNOTATION];
  return names ? names.split(',') : [];
}

/** The spec without the values of its secrets (their names stay in its annotation). Pure. */
export function withoutSecretValues(spec: Record<string, unknown>): Record<string, unknown> {
  const secret = new Set(secretEnvNames(spec));
  const copy = structuredClone(spec) as Record<string, unknown> & SavedSpec;
  if (copy.process?.env) copy.process.env = copy.process.env.filter((entry) => !secret.has(entry.slice(0, entry.indexOf('='))));
  return copy;
}

/**
 * The spec to restore a checkpoint with: the one the checkpointed sandbox ran with (runsc checks
 * that the two agree, so a changed default of this install must not leak in), with its host
 * directories and cgroup moved to where the restored sandbox lives, and the current values of the
 * secrets it names (a secret deleted since stays out). Pure.
 */
export function restoreSpec(saved: Record<string, unknown>, place: SandboxPlace): Record<string, unknown> {
  const spec = withoutSecretValues(saved) as Record<string, unknown> & SavedSpec;
  // A sandbox checkpointed before the guest folder (or the channel) was mounted has no such mount,
  // and needs none: its launcher came in its command line and is restored from its memory.
  const sources: Record<string, string> = {
    [WORKSPACE]: place.workspace,
    [EXEC_MOUNT]: place.execDir,
    [GUEST_MOUNT]: place.guestDir,
    [CHANNEL_MOUNT]: place.channelDir,
    ...(place.egressDir === undefined ? {} : { [EGRESS_MOUNT]: place.egressDir }),
  };
  for (const mount of spec.mounts ?? []) {
    const source = sources[mount.destination];
    if (source !== undefined) mount.source = source;
  }
  if (spec.process?.env) {
    for (const name of secretEnvNames(spec)) {
      const value = place.env[name];
      if (value !== undefined) spec.process.env.push(`${name}=${value}`);
    }
  }
  if (spec.linux) spec.linux.cgroupsPath = cgroupsPath(place.containerId);
  return spec;
}

/** Whether a sandbox of this spec has the launcher's channel (one of an older Berth does not). Pure. */
export function hasChannel(spec: Record<string, unknown>): boolean {
  return ((spec as SavedSpec).mounts ?? []).some((mount) => mount.destination === CHANNEL_MOUNT);
}

/** Whether a sandbox of this spec has the egress folder and relay (one of an older Berth does not). Pure. */
export function hasEgress(spec: Record<string, unknown>): boolean {
  return ((spec as SavedSpec).mounts ?? []).some((mount) => mount.destination === EGRESS_MOUNT);
}

/** The sandbox's cgroup, under each controller's hierarchy of the host. */
export function cgroupsPath(containerId: string): string {
  return `/berth/${containerId}`;
}
