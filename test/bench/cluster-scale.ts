import { randomBytes } from 'node:crypto';
/**
 * `make bench` (cluster part): how long until N Agent custom resources are N Running pods on
 * KWOK nodes and N idle agents, against a floor measured in the same run on the same control
 * plane: N bare pods of the same spec created directly, until Running. Also reconciles per
 * second of the operator (from its /metrics) while it works through the batch.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { DEFAULT_GPU_TABLE, createLogger, idToObjectName, newId } from '../../common/src/index.js';
import { startEmbeddedPostgres } from '../../apiserver/src/embedded/postgres.js';
import { desiredPod } from '../../providers/src/kubernetes/pod.js';
import { startTestCluster } from '../cluster/cluster.js';
import { BERTH_BIN, ROOT } from '../helpers/berth.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';

const SIZES = (process.env.BENCH_CLUSTER_SIZES ?? '100,1000').split(',').map(Number);
const CREATE_CONCURRENCY = 20;
const NAMESPACE = 'bench';

async function inBatches<T>(items: T[], work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CREATE_CONCURRENCY }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

function progress(line: string): void {
  process.stderr.write(`[bench] ${line}\n`);
}

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 600_000): Promise<void> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  let reported = started;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    if (Date.now() - reported > 10_000) {
      reported = Date.now();
      progress(`still waiting for ${what} (${Math.round((reported - started) / 1000)} s)`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function runningPods(core: CoreV1Api, selector: string): Promise<number> {
  const pods = await core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: selector });
  return pods.items.filter((pod) => pod.status?.phase === 'Running').length;
}

async function main(): Promise<void> {
  const log = createLogger({ level: 'warn', name: 'bench' });
  const cluster = await startTestCluster({ nodes: 3 });
  const pgDir = mkdtempSync(join(tmpdir(), 'berth-bench-pg-'));
  const postgres = await startEmbeddedPostgres(pgDir, log);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(cluster.kubeconfig);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  let operator: ReturnType<typeof spawn> | undefined;
  try {
    for (const args of [['apply', '-f', join(ROOT, 'crds', 'manifests')], ['create', 'namespace', NAMESPACE]]) {
      const result = await cluster.kubectlRun(args);
      if (result.code !== 0) throw new Error(result.stderr);
    }
    await cluster.kubectlRun(['wait', '--for=condition=Established', 'crd', '--all']);
    await cluster.kubectlRun(['apply', '-f', '-'], 'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: gvisor\nhandler: runsc\n');

    operator = spawn(process.execPath, [BERTH_BIN, 'operator'], {
      env: {
        ...process.env,
        KUBECONFIG: cluster.kubeconfig,
        DATABASE_URL: postgres.connectionString,
        BERTH_NAMESPACE: NAMESPACE,
        BERTH_HOST: '127.0.0.1',
        BERTH_METRICS_PORT: '0',
        BERTH_LEADER_ELECTION: 'false',
        BERTH_LOG_LEVEL: 'warn',
        // Cluster mode refuses to start without the key that encrypts secrets at rest.
        BERTH_SECRETS_KEY: randomBytes(32).toString('base64'),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const metricsUrl = await new Promise<string>((resolve, reject) => {
      let output = '';
      operator!.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const match = /health and metrics on (127\.0\.0\.1:\d+)/.exec(output);
        if (match) resolve(`http://${match[1]}/metrics`);
      });
      operator!.once('exit', (code) => reject(new Error(`operator exited with ${code}`)));
    });
    const reconciles = async () => metricValue(parsePrometheus(await (await fetch(metricsUrl)).text()), 'berth_reconcile_total', { kind: 'Agent' });

    const rows: string[] = [];
    for (const size of SIZES) {
      // Floor: the same pods, created directly; only the scheduler and KWOK stand between.
      const floorNames = Array.from({ length: size }, (_, index) => `floor-${size}-${index}`);
      const floorStarted = performance.now();
      await inBatches(floorNames, (name) => {
        const pod: V1Pod = desiredPod(
          { name, sessionName: 'floor', compute: 'python', browser: false, timeoutSeconds: 3600 },
          {
            namespace: NAMESPACE,
            runtimeClassName: 'gvisor',
            images: { python: 'berth/sandbox-python:0.1.0', node: 'n', go: 'g' },
            gpuTable: DEFAULT_GPU_TABLE,
            cpuRequest: 0.25,
            cpuLimit: 1,
            memoryRequestBytes: 256 * 1024 ** 2,
            memoryLimitBytes: 1024 ** 3,
            workspaceSizeBytes: 10 * 1024 ** 3,
          },
        );
        pod.metadata!.labels = { bench: `floor-${size}` };
        return core.createNamespacedPod({ namespace: NAMESPACE, body: pod });
      });
      await waitUntil(async () => (await runningPods(core, `bench=floor-${size}`)) === size, `${size} floor pods`);
      const floorSeconds = (performance.now() - floorStarted) / 1000;
      progress(`${size} floor pods running after ${floorSeconds.toFixed(1)} s`);

      const sessionId = newId('ses');
      const agentNames = Array.from({ length: size }, () => idToObjectName(newId('agt')));
      const before = await reconciles();
      const started = performance.now();
      progress(`creating ${size} agents`);
      await inBatches(agentNames, (name) =>
        custom.createNamespacedCustomObject({
          group: 'berth.dev',
          version: 'v1alpha1',
          namespace: NAMESPACE,
          plural: 'agents',
          body: {
            apiVersion: 'berth.dev/v1alpha1',
            kind: 'Agent',
            metadata: { name, labels: { 'berth.dev/session': idToObjectName(sessionId) }, finalizers: ['berth.dev/sandbox'] },
            spec: {
              sessionId,
              organizationId: 'org_bench',
              mode: 'live',
              userId: 'bench',
              desiredState: 'active',
              compute: 'python',
              browser: false,
              tools: [],
              timeout: '1h',
              timeoutSeconds: 3600,
              provider: 'kubernetes',
            },
          },
        }),
      );
      await waitUntil(async () => (await runningPods(core, `berth.dev/session=${idToObjectName(sessionId)}`)) === size, `${size} agent pods`);
      const podsSeconds = (performance.now() - started) / 1000;
      progress(`${size} agent pods running after ${podsSeconds.toFixed(1)} s`);
      await waitUntil(async () => {
        const list = (await custom.listNamespacedCustomObject({ group: 'berth.dev', version: 'v1alpha1', namespace: NAMESPACE, plural: 'agents' })) as {
          items: { spec: { sessionId: string }; status?: { phase?: string } }[];
        };
        return list.items.filter((agent) => agent.spec.sessionId === sessionId && agent.status?.phase === 'idle').length === size;
      }, `${size} idle agents`);
      const idleSeconds = (performance.now() - started) / 1000;
      const rate = ((await reconciles()) - before) / idleSeconds;
      rows.push(
        `${String(size).padStart(6)}${floorSeconds.toFixed(1).padStart(12)}${podsSeconds.toFixed(1).padStart(16)}${`${(podsSeconds / floorSeconds).toFixed(2)}x`.padStart(9)}${idleSeconds.toFixed(1).padStart(14)}${rate.toFixed(0).padStart(14)}`,
      );

      progress(`${size} agents idle after ${idleSeconds.toFixed(1)} s; cleaning up`);
      // Clean up before the next size: the operator deletes the pods of deleted agents.
      // (kubectl's own --wait misses deletions at this scale; counting is reliable.)
      await cluster.kubectlRun(['delete', 'agents', '--all', '-n', NAMESPACE, '--wait=false']);
      await cluster.kubectlRun(['delete', 'pods', '-l', `bench=floor-${size}`, '-n', NAMESPACE, '--grace-period=0', '--wait=false']);
      await waitUntil(async () => {
        const agents = (await custom.listNamespacedCustomObject({ group: 'berth.dev', version: 'v1alpha1', namespace: NAMESPACE, plural: 'agents' })) as {
          items: unknown[];
        };
        const pods = await core.listNamespacedPod({ namespace: NAMESPACE });
        return agents.items.length === 0 && pods.items.length === 0;
      }, 'the agents and pods to be deleted');
    }
    const version = /bin-(v[\d.]+)/.exec(cluster.binaries['kube-apiserver'] ?? '')?.[1] ?? 'unknown';
    console.log(`\nBerth operator scale: Kubernetes ${version} control plane on this machine, 3 KWOK nodes, one operator\n`);
    console.log(`${'agents'.padStart(6)}${'floor s'.padStart(12)}${'pods running s'.padStart(16)}${'ratio'.padStart(9)}${'all idle s'.padStart(14)}${'reconciles/s'.padStart(14)}`);
    for (const row of rows) console.log(row);
    console.log('\nfloor = the same pods created directly until Running; ratio = agent pods running / floor.');
  } finally {
    // The operator drains before the control plane goes, or its reconciles fail loudly against a stopped API server.
    if (operator && operator.exitCode === null) {
      const exited = new Promise((resolve) => operator!.once('exit', resolve));
      operator.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    }
    await cluster.stop();
    await postgres.stop();
    rmSync(pgDir, { recursive: true, force: true });
  }
}

await main();
