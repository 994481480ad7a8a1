/**
 * A real node for the test cluster: containerd with gVisor's shim as the only runtime (RuntimeClass
 * handler `runsc`), a kubelet registering against the control plane, a bridge CNI, and the pause
 * and sandbox images imported from local root filesystems. Pods scheduled onto it are real pods
 * in real gVisor sandboxes.
 *
 * One real node per machine at a time: the node IP lives on a host interface (`berth0`, a portless
 * bridge, because the kubelet refuses a loopback address) and the pods on a host bridge.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { importImage, ociLayout, pauseImage, sandboxImage, type ImageSpec } from './images.js';

export const NODE_NAME = 'berth-node';
/** On the host link `berth0`; the API server reaches the kubelet here. */
export const NODE_IP = '10.246.0.1';
const NODE_LINK = 'berth0';
const POD_SUBNET = '10.245.0.0/24';
const CNI_BRIDGE = 'berth-cni0';
const CNI_BIN = '/usr/lib/cni';
export const RUNSC = process.env.BERTH_RUNSC ?? '/usr/local/bin/runsc';
export const PAUSE_IMAGE = 'berth.local/pause:1';
const NODE_CACHE = process.env.BERTH_NODE_CACHE ?? '/var/cache/berth/node';
/** The shim's runsc: Berth's wrapper that restores pods the node agent staged a checkpoint for. */
export const RUNSC_RESTORE_WRAPPER = join(import.meta.dirname, '..', '..', 'apiserver', 'node-agent', 'runsc-restore.sh');
/** Where the node agent stages checkpoints for pods to restore (the wrapper reads them). */
export const RESTORES = '/run/berth-node/restores';
/** Held while a node runs: one node per machine (see holdNodeLock). */
const NODE_LOCK = '/run/berth-node.lock';

export interface NodeBinaries {
  dir: string;
  kubelet: string;
  containerd: string;
  ctr: string;
  pause: string;
  kubeProxy: string;
}

export interface NodeImage {
  /** What pods name, e.g. `berth/sandbox-python:0.1.0` (containerd stores docker.io/…). */
  reference: string;
  /** The local provider's rootfs directory (…/<image>-<hash>/rootfs). */
  rootfs: string;
}

/**
 * Whether this machine can run the real node, and if not why. What decides is the kernel and
 * the privileges: root (the kubelet and containerd manage cgroups, mounts and network namespaces),
 * `overlay` in /proc/filesystems (containerd's snapshotter), and `runsc --network=none do
 * /bin/true` succeeding (gVisor can start a sandbox on this kernel).
 */
export async function realNodeSupport(): Promise<{ ok: true } | { ok: false; reason: string }> {
  if (process.getuid?.() !== 0) return { ok: false, reason: 'the real node needs root (kubelet and containerd manage cgroups, mounts and network namespaces)' };
  if (!/\toverlay$/m.test(readFileSync('/proc/filesystems', 'utf8'))) {
    return { ok: false, reason: 'the kernel has no overlay filesystem (/proc/filesystems), which containerd\'s snapshotter needs' };
  }
  if (!existsSync(RUNSC)) return { ok: false, reason: `${RUNSC} is missing (make host installs it)` };
  const probe = await run(RUNSC, ['--network=none', 'do', '/bin/true']).then(
    () => undefined,
    (error: Error) => error.message,
  );
  if (probe !== undefined) return { ok: false, reason: `gVisor cannot start a sandbox on this kernel (runsc --network=none do /bin/true): ${probe}` };
  return { ok: true };
}

/** Runs test/node/build.sh (at once when the binaries are built). */
export async function buildNodeBinaries(log: (line: string) => void): Promise<NodeBinaries> {
  const dir = (await run('bash', [join(import.meta.dirname, 'build.sh')], log)).trim();
  return { dir, kubelet: join(dir, 'kubelet'), containerd: join(dir, 'containerd'), ctr: join(dir, 'ctr'), pause: join(dir, 'pause'), kubeProxy: join(dir, 'kube-proxy') };
}

export interface NodeProcessStarter {
  (name: string, command: string, args: string[], env?: NodeJS.ProcessEnv): { exited: Promise<void>; kill(signal: NodeJS.Signals): void; status(): string | undefined };
}

export interface RealNode {
  /** containerd's socket, for `ctr --address`. */
  containerdSocket: string;
  /** Where the runsc shim keeps its sandboxes' state: `runsc --root <this> list`. */
  runscRoot: string;
  ctr(args: string[]): Promise<string>;
  /** Stops the kubelet, removes every container and sandbox, then stops containerd. */
  stop(): Promise<void>;
}

export interface RealNodeOptions {
  dir: string;
  binaries: NodeBinaries;
  kubeconfig: string;
  caCert: string;
  servingCert: string;
  servingKey: string;
  kubeletPort: number;
  images: NodeImage[];
  start: NodeProcessStarter;
  waitUntil: (what: string, ready: () => Promise<boolean>) => Promise<void>;
  log: (line: string) => void;
}

/** Starts containerd (images imported) and the kubelet; the caller waits for the Node to be Ready. */
export async function startRealNode(options: RealNodeOptions): Promise<RealNode> {
  const lock = await holdNodeLock(options.log);
  try {
    return await startHeldNode(options, lock);
  } catch (error) {
    lock.release();
    throw error;
  }
}

/**
 * The node is host-wide (its links, bridge, cgroups and runsc state), so one runs per machine at a
 * time: a second run waits here for the first to stop. The lock is `flock` on NODE_LOCK held by a
 * child that lives as long as its stdin: it ends, and the lock is freed, when the holder releases it
 * or when the holding process dies in any way.
 */
async function holdNodeLock(log: (line: string) => void): Promise<{ release(): void }> {
  const child = spawn('flock', [NODE_LOCK, 'sh', '-c', 'echo held; exec cat >/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting = setTimeout(() => log(`[node] waiting for another run's node to stop (${NODE_LOCK})`), 2_000);
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`flock ${NODE_LOCK} exited with ${code}`)));
      child.stdout.once('data', () => resolve());
    });
  } finally {
    clearTimeout(waiting);
  }
  return { release: () => child.stdin.end() };
}

async function startHeldNode(options: RealNodeOptions, lock: { release(): void }): Promise<RealNode> {
  const { dir, binaries } = options;
  const nodeDir = join(dir, 'node');
  const containerdState = join(nodeDir, 'containerd-state');
  const socket = join(containerdState, 'containerd.sock');
  // Runtime state under /run, not the cluster's directory: runsc's socket paths must stay short.
  const runscRoot = join('/run/berth-node', 'runsc');
  await mkdir(join(nodeDir, 'cni', 'net.d'), { recursive: true });
  await setUpNodeLink();

  const containerdConfig = join(nodeDir, 'containerd.toml');
  await writeFile(join(nodeDir, 'runsc.toml'), runscShimConfig(runscRoot, nodeDir));
  await mkdir(RESTORES, { recursive: true });
  await writeFile(containerdConfig, containerdConfigToml(nodeDir, containerdState, socket));
  await writeFile(join(nodeDir, 'cni', 'net.d', '10-berth.conflist'), JSON.stringify(cniConfig(nodeDir), null, 2));

  // The shims are found on PATH: containerd-shim-runsc-v1 beside containerd, runsc in /usr/local/bin.
  // The shim runs runsc through Berth's restore wrapper, as a node with the node agent does: a pod
  // for which the node agent staged a checkpoint is restored instead of started (ADR 38).
  const env = {
    ...process.env,
    PATH: `${binaries.dir}:${join(RUNSC, '..')}:${process.env.PATH ?? ''}`,
    BERTH_RUNSC_BINARY: RUNSC,
    BERTH_NODE_RESTORES: RESTORES,
  };
  const containerd = options.start('containerd', binaries.containerd, ['--config', containerdConfig], env);
  const ctr = (args: string[]) => run(binaries.ctr, ['--address', socket, ...args]);
  await options.waitUntil('containerd', async () => existsSync(socket) && (await ctr(['version']).then(() => true, () => false)));
  options.log('[node] containerd ready');

  const imageCache = join(NODE_CACHE, 'images');
  const specs: ImageSpec[] = [
    await pauseImage(PAUSE_IMAGE, binaries.pause, imageCache),
    ...options.images.map((image) => sandboxImage(qualified(image.reference), image.rootfs)),
  ];
  for (const spec of specs) {
    const layout = await ociLayout(spec, imageCache);
    await importImage([binaries.ctr, '--address', socket], spec, layout);
  }
  options.log(`[node] images imported: ${specs.map((spec) => spec.reference).join(', ')}`);

  const kubeletDir = join(nodeDir, 'kubelet');
  await mkdir(kubeletDir, { recursive: true });
  const kubeletConfig = join(nodeDir, 'kubelet.yaml');
  await writeFile(kubeletConfig, stringify(kubeletConfiguration(options, socket)));
  const kubelet = options.start('kubelet', binaries.kubelet, [
    `--config=${kubeletConfig}`,
    `--kubeconfig=${options.kubeconfig}`,
    `--root-dir=${kubeletDir}`,
    `--hostname-override=${NODE_NAME}`,
    `--node-ip=${NODE_IP}`,
    '--node-labels=type=real',
    '--v=1',
  ]);

  // Services route on the node: kube-proxy programs the ClusterIPs (and the node's NodePorts) into
  // netfilter, so a pod reaches a Service's endpoints as on any cluster (not the `kubernetes`
  // Service, whose endpoint is the API server on loopback: the relay stands in for it).
  const kubeProxyConfig = join(nodeDir, 'kube-proxy.yaml');
  await writeFile(kubeProxyConfig, stringify(kubeProxyConfiguration(options.kubeconfig)));
  const kubeProxy = options.start('kube-proxy', binaries.kubeProxy, [`--config=${kubeProxyConfig}`, '--v=1']);

  const stopProcess = async (proc: ReturnType<NodeProcessStarter>) => {
    if (proc.status() !== undefined) return;
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    await proc.exited;
    clearTimeout(timer);
  };
  return {
    containerdSocket: socket,
    runscRoot: join(runscRoot, 'k8s.io'),
    ctr,
    async stop() {
      await stopProcess(kubeProxy);
      // Its rules outlive it: a ClusterIP would keep routing to the pods' old addresses.
      await run(binaries.kubeProxy, ['--cleanup', `--proxy-mode=${KUBE_PROXY_MODE}`], undefined, 30_000).catch((error: Error) => options.log(`[node] kube-proxy --cleanup: ${error.message}`));
      await stopProcess(kubelet);
      if (containerd.status() === undefined) {
        // Without the kubelet nothing restarts them: kill and remove every task and container,
        // which ends the runsc sandboxes and their shims. Each call has a time limit: a task whose
        // sandbox died at its start can hang a delete, and the sweep below ends those.
        const quick = (args: string[]) => run(binaries.ctr, ['--address', socket, '-n', 'k8s.io', ...args], undefined, 10_000).catch(() => '');
        const tasks = (await quick(['tasks', 'ls', '-q'])).split('\n').filter(Boolean);
        await Promise.all(tasks.map((task) => quick(['tasks', 'kill', '-a', '-s', 'SIGKILL', task])));
        await Promise.all(tasks.map((task) => quick(['tasks', 'delete', '-f', task])));
        const containers = (await quick(['containers', 'ls', '-q'])).split('\n').filter(Boolean);
        if (containers.length > 0) await quick(['containers', 'delete', ...containers]);
      }
      await stopProcess(containerd);
      await sweep(socket, join(runscRoot, 'k8s.io'));
      await unmountUnder(nodeDir);
      lock.release();
    },
  };
}

/** `berth/sandbox-python:0.1.0` as containerd stores it. */
function qualified(reference: string): string {
  const first = reference.split('/')[0]!;
  if (reference.includes('/') && (first.includes('.') || first.includes(':'))) return reference;
  return `docker.io/${reference.includes('/') ? reference : `library/${reference}`}`;
}

async function setUpNodeLink(): Promise<void> {
  const links = await run('ip', ['-o', 'link', 'show']);
  // A bridge with no ports: this kernel has no dummy link type built in, and bridges it must have (CNI).
  if (!links.includes(` ${NODE_LINK}:`)) await run('ip', ['link', 'add', NODE_LINK, 'type', 'bridge']);
  const addresses = await run('ip', ['-o', 'addr', 'show', 'dev', NODE_LINK]);
  if (!addresses.includes(` ${NODE_IP}/`)) await run('ip', ['addr', 'add', `${NODE_IP}/32`, 'dev', NODE_LINK]);
  await run('ip', ['link', 'set', NODE_LINK, 'up']);
}

/** The runsc shim's own config (the RuntimeClass handler's ConfigPath). */
function runscShimConfig(runscRoot: string, nodeDir: string): string {
  return [
    `binary_name = ${JSON.stringify(RUNSC_RESTORE_WRAPPER)}`,
    `root = ${JSON.stringify(runscRoot)}`,
    `log_path = ${JSON.stringify(join(nodeDir, 'shim.log'))}`,
    'log_level = "info"',
    '',
  ].join('\n');
}

/**
 * containerd 2's config (version 3). Content and snapshots live in the node cache, so images are
 * imported once per machine; everything about running containers lives in this cluster's
 * directory. runsc is the default and only runtime: every pod here is a gVisor pod, the pause
 * container included.
 */
function containerdConfigToml(nodeDir: string, state: string, socket: string): string {
  const q = JSON.stringify;
  const runtime = "plugins.'io.containerd.cri.v1.runtime'";
  return `version = 3
root = ${q(join(NODE_CACHE, 'containerd-root'))}
state = ${q(state)}
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = ${q(socket)}

[ttrpc]
  address = ${q(`${socket}.ttrpc`)}

[plugins.'io.containerd.internal.v1.opt']
  path = ${q(join(NODE_CACHE, 'opt'))}

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = ${q(PAUSE_IMAGE)}

[${runtime}]
  # Root here may lack CAP_SYS_RESOURCE (this machine's does): never ask runsc for an OOM score
  # below containerd's own, which it could not set (the pause container's default is -998).
  restrict_oom_score_adj = true

[${runtime}.containerd]
  default_runtime_name = "runsc"

[${runtime}.containerd.runtimes.runsc]
  runtime_type = "io.containerd.runsc.v1"

[${runtime}.containerd.runtimes.runsc.options]
  TypeUrl = "io.containerd.runsc.v1.options"
  ConfigPath = ${q(join(nodeDir, 'runsc.toml'))}

[${runtime}.cni]
  bin_dirs = [${q(CNI_BIN)}]
  conf_dir = ${q(join(nodeDir, 'cni', 'net.d'))}
`;
}

/** A host bridge with host-local addresses; no masquerade (sandboxes have no way out unless allowed). */
function cniConfig(nodeDir: string) {
  return {
    cniVersion: '1.0.0',
    name: 'berth-test',
    plugins: [
      {
        type: 'bridge',
        bridge: CNI_BRIDGE,
        isGateway: true,
        ipMasq: false,
        ipam: { type: 'host-local', ranges: [[{ subnet: POD_SUBNET }]], routes: [{ dst: '0.0.0.0/0' }], dataDir: join(nodeDir, 'cni', 'ipam') },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
}

function kubeletConfiguration(options: RealNodeOptions, socket: string) {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // This host has cgroup v1, which the kubelet (since 1.35) refuses unless told otherwise.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    containerRuntimeEndpoint: `unix://${socket}`,
    address: NODE_IP,
    port: options.kubeletPort,
    readOnlyPort: 0,
    healthzPort: 0,
    tlsCertFile: options.servingCert,
    tlsPrivateKeyFile: options.servingKey,
    // The API server presents a client certificate this CA signed for exec, logs and port-forward.
    authentication: { anonymous: { enabled: false }, webhook: { enabled: false }, x509: { clientCAFile: options.caCert } },
    authorization: { mode: 'AlwaysAllow' },
    failSwapOn: false,
    // A shared development machine: disk and memory pressure must not evict the tests' pods.
    evictionHard: { 'memory.available': '50Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
    // The images come from no registry: never garbage-collect them.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    serializeImagePulls: false,
    volumePluginDir: join(options.dir, 'node', 'volume-plugins'),
    // Report status quickly, so that a test sees Running soon after the container starts.
    nodeStatusUpdateFrequency: '4s',
    syncFrequency: '10s',
    resolvConf: '/etc/resolv.conf',
    registerNode: true,
    maxPods: 50,
  };
}

/**
 * kube-proxy's mode on this machine. Both modes work here beside kube-network-policies (the node
 * tier's helm install with the egress gateway passes with either; a TCP connect from a gVisor pod
 * costs the same through a ClusterIP as to the pod IP in both, see ADR 52): nftables, because
 * kube-proxy's table (`ip kube-proxy`) then sits beside the enforcer's as a table of its own, with
 * no rules in the iptables-nft tables the kubelet and others share, and it is the mode Kubernetes
 * recommends for new nodes.
 */
const KUBE_PROXY_MODE = 'nftables';

function kubeProxyConfiguration(kubeconfig: string) {
  return {
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    mode: KUBE_PROXY_MODE,
    clientConnection: { kubeconfig },
    hostnameOverride: NODE_NAME,
    // Traffic from the pods' subnet to a ClusterIP is not masqueraded: the endpoint sees the
    // client pod's own address, as on a cluster whose CNI does not masquerade pod traffic.
    clusterCIDR: POD_SUBNET,
    bindAddress: NODE_IP,
    healthzBindAddress: `${NODE_IP}:10256`,
    metricsBindAddress: `${NODE_IP}:10249`,
    nodePortAddresses: [`${NODE_IP}/32`],
    // A shared machine: leave the host's conntrack table size and timeouts as they are.
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
  };
}

/**
 * Ends what outlived containerd: the shims it started (they name its socket on their command
 * line) and the runsc sandboxes in the shims' state directory.
 */
async function sweep(socket: string, runscRoot: string): Promise<void> {
  for (const pid of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (args[0]?.endsWith('containerd-shim-runsc-v1') && args.includes(socket)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
  if (!existsSync(runscRoot)) return;
  const listed = await run(RUNSC, [`--root=${runscRoot}`, 'list', '--quiet'], undefined, 10_000).catch(() => '');
  for (const id of listed.split('\n').filter(Boolean)) await run(RUNSC, [`--root=${runscRoot}`, 'delete', '--force', id], undefined, 10_000).catch(() => '');
}

/** Unmounts what the kubelet left mounted (secret and projected volumes are tmpfs mounts). */
async function unmountUnder(dir: string): Promise<void> {
  const mounts = (await readFile('/proc/mounts', 'utf8'))
    .split('\n')
    .map((line) => line.split(' ')[1]?.replace(/\\040/g, ' '))
    .filter((path): path is string => path !== undefined && path.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const path of mounts) await run('umount', ['-l', path]).catch(() => '');
}

function run(command: string, args: string[], onStderrLine?: (line: string) => void, timeoutMs?: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...(timeoutMs ? { timeout: timeoutMs, killSignal: 'SIGKILL' as const } : {}) });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
      if (onStderrLine) for (const line of chunk.split('\n').filter(Boolean)) onStderrLine(line);
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${command} ${args.join(' ')} failed (${code}): ${stderr.slice(-2000)}`))));
  });
}
