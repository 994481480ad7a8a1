import type { Compute } from '@berth/crds';
import { launcherArgs } from './launcher.js';

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
  env: Record<string, string>;
  cpus: number;
  memoryBytes: number;
  pidsLimit?: number;
}

export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Where the host puts exec'd programs; read-only inside the sandbox. */
export const EXEC_MOUNT = '/run/berth/exec';
const WORKSPACE = '/workspace';
/** Annotations that say what the sandbox was made from, for a snapshot's manifest. */
export const IMAGE_ANNOTATION = 'berth.dev/image';
export const COMPUTE_ANNOTATION = 'berth.dev/compute';
const CAPABILITIES = ['CAP_AUDIT_WRITE', 'CAP_KILL', 'CAP_NET_BIND_SERVICE'];
const CPU_PERIOD_US = 100_000;

/**
 * The OCI runtime spec of a local sandbox: the image's root filesystem shared by every sandbox
 * (runsc overlays it in memory, so the agent can write anywhere without changing it), the agent's own
 * `/workspace` from the host, and the launcher as PID 1 (it starts exec'd programs and reaps orphans).
 * Pure: the same input always gives the same spec.
 */
export function sandboxSpec(input: SandboxSpecInput): Record<string, unknown> {
  const env = { PATH: SANDBOX_PATH, HOME: '/root', LANG: 'C.UTF-8', ...input.env };
  return {
    ociVersion: '1.0.0',
    process: {
      user: { uid: 0, gid: 0 },
      args: launcherArgs(),
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
      { destination: WORKSPACE, type: 'bind', source: input.workspace, options: ['rbind', 'rw'] },
      { destination: EXEC_MOUNT, type: 'bind', source: input.execDir, options: ['rbind', 'ro'] },
    ],
    annotations: { [IMAGE_ANNOTATION]: input.image, [COMPUTE_ANNOTATION]: input.compute },
    linux: {
      namespaces: [{ type: 'pid' }, { type: 'network' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }],
      cgroupsPath: cgroupsPath(input.containerId),
      resources: {
        memory: { limit: input.memoryBytes },
        cpu: { quota: Math.round(input.cpus * CPU_PERIOD_US), period: CPU_PERIOD_US },
        pids: { limit: input.pidsLimit ?? 1024 },
      },
    },
  };
}

/** Where a restored sandbox's host directories are. */
export interface SandboxPlace {
  containerId: string;
  workspace: string;
  execDir: string;
}

interface SavedSpec {
  mounts?: { destination: string; source?: string }[];
  linux?: { cgroupsPath?: string };
}

/**
 * The spec to restore a checkpoint with: the one the checkpointed sandbox ran with (runsc checks
 * that the two agree, so a changed default of this install must not leak in), with its host
 * directories and cgroup moved to where the restored sandbox lives. Pure.
 */
export function restoreSpec(saved: Record<string, unknown>, place: SandboxPlace): Record<string, unknown> {
  const spec = structuredClone(saved) as Record<string, unknown> & SavedSpec;
  const sources: Record<string, string> = { [WORKSPACE]: place.workspace, [EXEC_MOUNT]: place.execDir };
  for (const mount of spec.mounts ?? []) {
    const source = sources[mount.destination];
    if (source !== undefined) mount.source = source;
  }
  if (spec.linux) spec.linux.cgroupsPath = cgroupsPath(place.containerId);
  return spec;
}

function cgroupsPath(containerId: string): string {
  return `/berth/${containerId}`;
}
