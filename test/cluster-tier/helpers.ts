import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import { BERTH_BIN, runBerth } from '../helpers/berth.js';
import { apiClient, eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** kubectl against the run's test cluster. */
export function kubectl(args: string[], input?: string): Promise<KubectlResult> {
  return new Promise((resolve) => {
    const child = execFile(
      inject('kubectl'),
      ['--kubeconfig', inject('kubeconfig'), ...args],
      { maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    if (input !== undefined) child.stdin!.end(input);
  });
}

export async function kubectlJson<T = any>(args: string[]): Promise<T> {
  const result = await kubectl([...args, '-o', 'json']);
  if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

/** A fresh namespace for one test file. */
export async function createNamespace(prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  const result = await kubectl(['create', 'namespace', name]);
  if (result.code !== 0) throw new Error(result.stderr);
  return name;
}

export interface ClusterProcess {
  child: ChildProcess;
  /** `http://127.0.0.1:<port>` of the API (apiserver) or of health and metrics (operator). */
  url: string;
  /** `http://127.0.0.1:<port>` of /metrics: the apiserver's own metrics listener, the operator's one port. */
  metricsUrl: string;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `berth apiserver`, `berth operator` or `berth node` (the node agent) against the test cluster, out of cluster. */
export async function startClusterProcess(
  command: 'apiserver' | 'operator' | 'node',
  env: Record<string, string>,
): Promise<ClusterProcess> {
  const child = spawn(process.execPath, [BERTH_BIN, command], {
    env: {
      ...process.env,
      KUBECONFIG: inject('kubeconfig'),
      BERTH_HOST: '127.0.0.1',
      BERTH_PORT: '0',
      BERTH_METRICS_PORT: '0',
      BERTH_LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const pattern = {
    apiserver: /listening on (127\.0\.0\.1:\d+).*; metrics on (127\.0\.0\.1:\d+)/,
    operator: /health and metrics on (127\.0\.0\.1:\d+)()/,
    node: /node agent on ([\d.]+:\d+)()/,
  }[command];
  const [address, metricsAddress] = await new Promise<[string, string]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`berth ${command} did not start:\n${output.slice(-3000)}`)), 60_000);
    const onData = () => {
      const match = pattern.exec(output);
      if (!match) return;
      clearTimeout(timer);
      resolve([match[1]!, match[2] || match[1]!]);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`berth ${command} exited with ${code}:\n${output.slice(-3000)}`));
    });
  });
  return {
    child,
    url: `http://${address}`,
    metricsUrl: `http://${metricsAddress}`,
    output: () => output,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      return exited;
    },
  };
}

export interface BerthInCluster {
  namespace: string;
  databaseUrl: string;
  liveKey: string;
  live: ApiClient;
  apiserver: ClusterProcess;
  operators: ClusterProcess[];
  env: Record<string, string>;
  stop(): Promise<void>;
}

/** A namespace, a database, one `berth apiserver`, `operators` operator replicas and a live key. */
export async function startBerthInCluster(options: { prefix: string; operators?: number; env?: Record<string, string> }): Promise<BerthInCluster> {
  const namespace = await createNamespace(options.prefix);
  const databaseUrl = await createTestDatabase();
  const env = {
    DATABASE_URL: databaseUrl,
    BERTH_NAMESPACE: namespace,
    BERTH_SNAPSHOT_DIR: mkdtempSync(join(tmpdir(), 'berth-cluster-snapshots-')),
    BERTH_SECRETS_KEY: randomBytes(32).toString('base64'),
    ...options.env,
  };
  const operators: ClusterProcess[] = [];
  for (let i = 0; i < (options.operators ?? 1); i++) operators.push(await startClusterProcess('operator', { ...env, POD_NAME: `operator-${i}` }));
  const apiserver = await startClusterProcess('apiserver', env);
  const created = await runBerth(['keys', 'create', '--mode', 'live'], { ...env, BERTH_LOG_LEVEL: 'warn' });
  const key = /key: (svc_live_\S+)/.exec(created.stdout)?.[1];
  if (!key) throw new Error(`could not create a key: ${created.stderr}`);
  return {
    namespace,
    databaseUrl,
    env,
    liveKey: key,
    live: apiClient(apiserver.url, key),
    apiserver,
    operators,
    async stop() {
      await Promise.all([apiserver, ...operators].map((process) => process.stop()));
      await kubectl(['delete', 'namespace', namespace, '--wait=false']);
    },
  };
}

export async function waitForAgent(api: ApiClient, id: string, status: string, timeoutMs = 60_000) {
  return eventually(
    async () => {
      const agent = (await api.get(`/v1/agents/${id}`)).body;
      return agent.status === status ? agent : undefined;
    },
    { timeoutMs, what: `agent ${id} to be ${status}` },
  );
}
