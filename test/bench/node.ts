/**
 * `make bench` (real node part): Berth's operator and API server against the test cluster with a
 * real node (kubelet, containerd, gVisor pods), each figure beside a floor measured in the same
 * run on the same node:
 *   - create: an agent from POST until its pod is Running and until the agent is idle, against a
 *     bare pod of the same spec (desiredPod: image, RuntimeClass, limits) created directly until
 *     Running;
 *   - exec: POST /v1/agents/{id}/exec of `print(42)` in python, against `kubectl exec` of
 *     `python3 -c 'print(42)'` into the same pod (both through the API server and the kubelet);
 *   - pause then resume at filesystem level (workspace archived, pod deleted; a new pod, files
 *     restored), against deleting the bare pod until gone and creating it again until Running;
 *   - pause then resume at native level (ADR 38: the node agent checkpoints the pod's sandbox with
 *     runsc and stages it for the new pod, which runsc restores), against the same floor, with
 *     pause and resume also apart. The filesystem rows run before the node agent starts (the
 *     operator falls back to them where no node agent answers), the native rows after;
 *   - create with a warm claim (ADR 53): an agent with a secret from POST until idle, adopting a
 *     running pod of a warm pool of 2, against the cold create -> idle of the same run.
 * Medians of BENCH_RUNS (default 10). Numbers from a shared two-core machine are noisy.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { DEFAULT_GPU_TABLE, createLogger } from '../../common/src/index.js';
import { startEmbeddedPostgres } from '../../apiserver/src/embedded/postgres.js';
import { desiredPod } from '../../providers/src/kubernetes/pod.js';
import { startTestCluster } from '../cluster/cluster.js';
import { BERTH_BIN, ROOT, runBerth } from '../helpers/berth.js';
import { apiClient } from '../helpers/http.js';
import { NODE_IP, RESTORES, RUNSC, realNodeSupport } from '../node/node.js';
import { createServer } from 'node:net';
import { sandboxImageReference, sandboxNodeImages } from '../node/sandbox-images.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 10);
const NAMESPACE = 'bench-node';

const progress = (line: string) => process.stderr.write(`[bench] ${line}\n`);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function startProcess(command: 'apiserver' | 'operator' | 'node', env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [BERTH_BIN, command], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const pattern = { apiserver: /listening on (127\.0\.0\.1:\d+)/, operator: /health and metrics on (127\.0\.0\.1:\d+)/, node: /node agent on ([\d.]+:\d+)/ }[command];
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = pattern.exec(output);
      if (match) resolve({ child, url: `http://${match[1]}` });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`berth ${command} exited with ${code}:\n${output.slice(-2000)}`)));
  });
}

function expect201(response: { status: number; body: unknown }): void {
  if (response.status !== 200 && response.status !== 201) throw new Error(`answered ${response.status}: ${JSON.stringify(response.body)}`);
}

async function main(): Promise<void> {
  const support = await realNodeSupport();
  if (!support.ok) {
    // Printed as the table's only line, so that smoke sees the bench ran and says why it measured nothing.
    console.log(`real node bench: not run on this machine (${support.reason}); floor: none`);
    return;
  }
  const log = createLogger({ level: 'warn', name: 'bench' });
  const pgDir = mkdtempSync(join(tmpdir(), 'berth-bench-pg-'));
  const postgres = await startEmbeddedPostgres(pgDir, log);
  const cluster = await startTestCluster({ nodes: 0, realNode: { images: await sandboxNodeImages(['python']) } });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(cluster.kubeconfig);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const processes: ChildProcess[] = [];
  const kubectl = async (args: string[], input?: string) => {
    const result = await cluster.kubectlRun(args, input);
    if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${result.stderr}`);
    return result.stdout;
  };
  const podPhase = async (name: string) => (await core.readNamespacedPod({ name, namespace: NAMESPACE })).status?.phase;
  try {
    await kubectl(['apply', '-f', join(ROOT, 'crds', 'manifests')]);
    await kubectl(['create', 'namespace', NAMESPACE]);
    await kubectl(['wait', '--for=condition=Established', 'crd', '--all']);
    await kubectl(['apply', '-f', '-'], 'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: gvisor\nhandler: runsc\n');
    const nodeAgentPort = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, NODE_IP, () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const nodeAgentToken = randomBytes(24).toString('hex');
    const env = {
      BERTH_NODE_AGENT_PORT: String(nodeAgentPort),
      BERTH_NODE_AGENT_TOKEN: nodeAgentToken,
      KUBECONFIG: cluster.kubeconfig,
      DATABASE_URL: postgres.connectionString,
      BERTH_NAMESPACE: NAMESPACE,
      BERTH_HOST: '127.0.0.1',
      BERTH_PORT: '0',
      BERTH_METRICS_PORT: '0',
      BERTH_LEADER_ELECTION: 'false',
      BERTH_LOG_LEVEL: 'warn',
      BERTH_SNAPSHOT_DIR: mkdtempSync(join(tmpdir(), 'berth-bench-snapshots-')),
      BERTH_SECRETS_KEY: randomBytes(32).toString('base64'),
    };
    const operator = await startProcess('operator', env);
    processes.push(operator.child);
    const apiserver = await startProcess('apiserver', env);
    processes.push(apiserver.child);
    const key = /key: (svc_live_\S+)/.exec((await runBerth(['keys', 'create', '--mode', 'live'], env)).stdout)?.[1];
    if (!key) throw new Error('could not create a key');
    const api = apiClient(apiserver.url, key);
    const sessionId = (await api.post('/v1/sessions', { userId: 'bench-node' })).body.id as string;

    const floorCreate: number[] = [];
    const agentRunning: number[] = [];
    const agentIdle: number[] = [];
    const berthExec: number[] = [];
    const kubectlExec: number[] = [];
    const pauseResume: number[] = [];
    const recreate: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const floorName = `floor-${run}`;
      const pod = desiredPod(
        { name: floorName, sessionName: 'floor', compute: 'python', browser: false, timeoutSeconds: 3600 },
        {
          namespace: NAMESPACE,
          runtimeClassName: 'gvisor',
          images: { python: sandboxImageReference('python'), node: sandboxImageReference('node'), go: sandboxImageReference('go') },
          gpuTable: DEFAULT_GPU_TABLE,
          cpuRequest: 0.1,
          cpuLimit: 1,
          memoryRequestBytes: 128 * 1024 ** 2,
          memoryLimitBytes: 1024 ** 3,
          workspaceSizeBytes: 1024 ** 3,
        },
      );
      let started = performance.now();
      await core.createNamespacedPod({ namespace: NAMESPACE, body: pod });
      await waitUntil(async () => (await podPhase(floorName)) === 'Running', `pod ${floorName} Running`);
      floorCreate.push(performance.now() - started);

      started = performance.now();
      const agent = (await api.post(`/v1/sessions/${sessionId}/agents`, { timeout: '30m' })).body;
      const agentPod = String(agent.id).replace('_', '-');
      await waitUntil(async () => (await podPhase(agentPod)) === 'Running', `pod ${agentPod} Running`);
      agentRunning.push(performance.now() - started);
      await waitUntil(async () => (await api.get(`/v1/agents/${agent.id}`)).body.status === 'idle', `agent ${agent.id} idle`);
      agentIdle.push(performance.now() - started);

      started = performance.now();
      const exec = await api.post(`/v1/agents/${agent.id}/exec`, { language: 'python', code: 'print(42)' });
      berthExec.push(performance.now() - started);
      if (exec.body.stdout !== '42\n') throw new Error(`exec answered ${JSON.stringify(exec.body)}`);
      started = performance.now();
      const direct = await new Promise<string>((resolve, reject) =>
        execFile(cluster.kubectl, ['--kubeconfig', cluster.kubeconfig, 'exec', '-n', NAMESPACE, agentPod, '--', 'python3', '-c', 'print(42)'], (error, stdout) =>
          error ? reject(error) : resolve(stdout),
        ),
      );
      kubectlExec.push(performance.now() - started);
      if (direct !== '42\n') throw new Error(`kubectl exec answered ${direct}`);

      await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'echo kept > kept.txt' });
      started = performance.now();
      const paused = await api.post(`/v1/agents/${agent.id}/pause`);
      const resumed = await api.post(`/v1/agents/${agent.id}/resume`);
      pauseResume.push(performance.now() - started);
      if (paused.body.status !== 'paused' || resumed.body.status !== 'idle') {
        throw new Error(`pause answered ${JSON.stringify(paused.body)}, resume ${JSON.stringify(resumed.body)}`);
      }
      const kept = await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'cat kept.txt' });
      if (kept.body.stdout !== 'kept\n') throw new Error(`the resumed workspace answered ${JSON.stringify(kept.body)}`);
      started = performance.now();
      await core.deleteNamespacedPod({ name: floorName, namespace: NAMESPACE, gracePeriodSeconds: 0 });
      await waitUntil(async () => {
        try {
          await core.readNamespacedPod({ name: floorName, namespace: NAMESPACE });
          return false;
        } catch {
          return true;
        }
      }, `pod ${floorName} gone`);
      await core.createNamespacedPod({ namespace: NAMESPACE, body: pod });
      await waitUntil(async () => (await podPhase(floorName)) === 'Running', `pod ${floorName} Running again`);
      recreate.push(performance.now() - started);

      await api.post(`/v1/agents/${agent.id}/terminate`);
      await core.deleteNamespacedPod({ name: floorName, namespace: NAMESPACE, gracePeriodSeconds: 0 });
      progress(`run ${run + 1}/${RUNS}`);
    }
    // Warm claims: a pool of 2 python pods, full before each create, so that each claims a running pod.
    expect201(await api.post('/v1/secrets', { BENCH_TOKEN: 'bench-secret' }));
    const pool = (await api.post('/v1/warm-pools', { compute: 'python', size: 2 })).body;
    const warmIdle: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      await waitUntil(async () => (await api.get(`/v1/warm-pools/${pool.id}`)).body.ready === 2, `warm pool ${pool.id} full`);
      const started = performance.now();
      const agent = (await api.post(`/v1/sessions/${sessionId}/agents`, { timeout: '30m', secrets: ['BENCH_TOKEN'] })).body;
      await waitUntil(async () => (await api.get(`/v1/agents/${agent.id}`)).body.status === 'idle', `agent ${agent.id} idle`);
      warmIdle.push(performance.now() - started);
      const view = (await api.get(`/v1/agents/${agent.id}`)).body;
      if (!/claimed from warm pool/.test(view.conditions[0]?.message ?? '')) throw new Error(`agent ${agent.id} did not claim: ${JSON.stringify(view.conditions)}`);
      const secret = await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'printf %s "$BENCH_TOKEN"' });
      if (secret.body.stdout !== 'bench-secret') throw new Error(`the claimed pod answered ${JSON.stringify(secret.body)}`);
      await api.post(`/v1/agents/${agent.id}/terminate`);
      progress(`warm run ${run + 1}/${RUNS}`);
    }
    await api.raw(`/v1/warm-pools/${pool.id}`, { method: 'DELETE' });
    // Native level: the node agent on the node (a host process here, as the DaemonSet runs on the host network).
    const nodeAgent = await startProcess('node', {
      ...env,
      BERTH_HOST: NODE_IP,
      BERTH_NODE_NAME: 'berth-node',
      BERTH_NODE_RUNSC_ROOT: cluster.node!.runscRoot,
      BERTH_NODE_STATE_DIR: join(RESTORES, '..'),
      BERTH_RUNSC: RUNSC,
    });
    processes.push(nodeAgent.child);
    const nativePause: number[] = [];
    const nativeResume: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const agent = (await api.post(`/v1/sessions/${sessionId}/agents`, { timeout: '30m' })).body;
      await waitUntil(async () => (await api.get(`/v1/agents/${agent.id}`)).body.status === 'idle', `agent ${agent.id} idle`);
      await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'echo kept > /dev/shm/kept' });
      let started = performance.now();
      const paused = await api.post(`/v1/agents/${agent.id}/pause`);
      nativePause.push(performance.now() - started);
      started = performance.now();
      const resumed = await api.post(`/v1/agents/${agent.id}/resume`);
      nativeResume.push(performance.now() - started);
      const snapshot = (await api.get(`/v1/snapshots?agentId=${agent.id}`)).body.data[0];
      if (paused.body.status !== 'paused' || resumed.body.status !== 'idle' || snapshot?.level !== 'native') {
        throw new Error(`native pause answered ${JSON.stringify(paused.body)}, resume ${JSON.stringify(resumed.body)}, snapshot ${JSON.stringify(snapshot)}`);
      }
      // /dev/shm is the sandbox's memory: only a native restore brings it back.
      const kept = await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'cat /dev/shm/kept' });
      if (kept.body.stdout !== 'kept\n') throw new Error(`the natively resumed sandbox answered ${JSON.stringify(kept.body)}`);
      await api.post(`/v1/agents/${agent.id}/terminate`);
      progress(`native run ${run + 1}/${RUNS}`);
    }
    const row = (what: string, value: number, floor: number) =>
      `${what.padEnd(34)}${value.toFixed(0).padStart(10)}${floor.toFixed(0).padStart(10)}${`${(value / floor).toFixed(2)}x`.padStart(9)}`;
    console.log(`\nBerth on a real node: kubelet, containerd 2.1, gVisor pods on this machine; medians of ${RUNS}\n`);
    console.log(`${'what'.padEnd(34)}${'ms'.padStart(10)}${'floor ms'.padStart(10)}${'ratio'.padStart(9)}`);
    console.log(row('agent create -> pod Running', median(agentRunning), median(floorCreate)));
    console.log(row('agent create -> idle', median(agentIdle), median(floorCreate)));
    console.log(row('agent create -> idle, warm claim', median(warmIdle), median(agentIdle)));
    console.log(row('exec python print(42)', median(berthExec), median(kubectlExec)));
    console.log(row('pause + resume (filesystem level)', median(pauseResume), median(recreate)));
    console.log(row('pause + resume (native level)', median(nativePause.map((pause, i) => pause + nativeResume[i]!)), median(recreate)));
    console.log(row('  native pause', median(nativePause), median(recreate)));
    console.log(row('  native resume', median(nativeResume), median(recreate)));
    console.log(
      '\nfloor: create = a bare pod of the same spec created directly until Running; warm claim = the cold agent create -> idle above;\n' +
        'exec = `kubectl exec` of the same command into the same pod;\n' +
        'pause + resume (both levels, and native pause and resume apart) = that bare pod deleted until gone and created again until Running.',
    );
  } finally {
    for (const child of processes.reverse()) {
      if (child.exitCode !== null) continue;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    }
    await cluster.stop();
    await postgres.stop();
    rmSync(pgDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
