/** What one local sandbox looks like; `sandboxSpec` turns it into an OCI runtime spec. */
export interface SandboxSpecInput {
  containerId: string;
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
const CAPABILITIES = ['CAP_AUDIT_WRITE', 'CAP_KILL', 'CAP_NET_BIND_SERVICE'];
const CPU_PERIOD_US = 100_000;

/**
 * The OCI runtime spec of a local sandbox: the image's root filesystem shared by every sandbox
 * (runsc overlays it in memory, so the agent can write anywhere without changing it), the agent's own
 * `/workspace` from the host, and tini as PID 1 so that orphans are reaped.
 * Pure: the same input always gives the same spec.
 */
export function sandboxSpec(input: SandboxSpecInput): Record<string, unknown> {
  const env = { PATH: SANDBOX_PATH, HOME: '/root', LANG: 'C.UTF-8', ...input.env };
  return {
    ociVersion: '1.0.0',
    process: {
      user: { uid: 0, gid: 0 },
      args: ['/usr/bin/tini', '-s', '--', '/bin/sleep', 'infinity'],
      env: Object.entries(env).map(([key, value]) => `${key}=${value}`),
      cwd: '/workspace',
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
      { destination: '/workspace', type: 'bind', source: input.workspace, options: ['rbind', 'rw'] },
      { destination: '/run/berth/exec', type: 'bind', source: input.execDir, options: ['rbind', 'ro'] },
    ],
    linux: {
      namespaces: [{ type: 'pid' }, { type: 'network' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }],
      cgroupsPath: `/berth/${input.containerId}`,
      resources: {
        memory: { limit: input.memoryBytes },
        cpu: { quota: Math.round(input.cpus * CPU_PERIOD_US), period: CPU_PERIOD_US },
        pids: { limit: input.pidsLimit ?? 1024 },
      },
    },
  };
}
