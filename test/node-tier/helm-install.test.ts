import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiClient, eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { createNamespace, kubectl, kubectlJson, waitForAgent } from '../cluster-tier/helpers.js';
import { berthImage } from '../node/berth-image.js';
import { importImage, ociLayout } from '../node/images.js';
import { NODE_IP, NODE_NAME } from '../node/node.js';
import { relayFromNodeIp, type NodeRelay } from '../node/relay.js';
import { sandboxNodeImages } from '../node/sandbox-images.js';

/**
 * The chart installed onto the real node as a customer installs it: `helm install` with Berth's own
 * image (built here from a root filesystem and imported into the node's containerd, pullPolicy
 * Never), the API server and operator as gVisor pods, an agent created through the installed API
 * server becoming a gVisor pod that runs python, and `helm uninstall` removing Berth's pods.
 *
 * What the test cluster lacks and a customer's has (ADR 48): no kube-proxy, so the `kubernetes`
 * Service does not route and the pods are pointed at the API server on the node IP through
 * KUBERNETES_SERVICE_HOST/PORT (extraEnv); no cluster DNS, so the database is an external
 * DATABASE_URL naming the node IP. Both servers listen on loopback; relays on the node IP reach them.
 */
const unavailable = inject('realNodeUnavailable');
const RELEASE = 'hel';
const FULLNAME = `${RELEASE}-berth`;
const IMAGE = 'docker.io/berth/berth:0.1.0';
const CHART = join(import.meta.dirname, '..', '..', 'charts', 'berth');
const NODE_IMAGE_CACHE = join(process.env.BERTH_NODE_CACHE ?? '/var/cache/berth/node', 'images');

function helm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(inject('helm'), ['--kubeconfig', inject('kubeconfig'), ...args], { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

function runscList(): Promise<{ id: string; status: string }[]> {
  return new Promise((resolve, reject) =>
    execFile('/usr/local/bin/runsc', [`--root=${inject('runscRoot')}`, 'list', '--format=json'], (error, stdout, stderr) =>
      error ? reject(new Error(stderr)) : resolve((JSON.parse(stdout) as { id: string; status: string }[] | null) ?? []),
    ),
  );
}

interface Pod {
  metadata: { name: string; labels: Record<string, string> };
  spec: { nodeName?: string; runtimeClassName?: string; containers: { image: string; imagePullPolicy: string }[] };
  status: { phase: string; podIP?: string; containerStatuses?: { containerID?: string; ready: boolean }[] };
}

async function releasePods(namespace: string): Promise<Pod[]> {
  return (await kubectlJson<{ items: Pod[] }>(['get', 'pods', '-n', namespace, '-l', `app.kubernetes.io/instance=${RELEASE}`])).items;
}

describe.skipIf(unavailable !== '')('helm install of the chart on the real node', () => {
  let namespace: string;
  let workDir: string;
  const relays: NodeRelay[] = [];
  let installed = false;
  let api: ApiClient;

  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'berth-helm-node-'));
    // Berth's image: the node sandbox image's rootfs (Node.js 24) plus the built app.
    const [nodeImage] = await sandboxNodeImages(['node']);
    const spec = await berthImage(IMAGE, nodeImage!.rootfs, NODE_IMAGE_CACHE);
    const layout = await ociLayout(spec, NODE_IMAGE_CACHE);
    await importImage([inject('ctr'), '--address', inject('containerdSocket')], spec, layout);

    const server = new URL((parse(readFileSync(inject('kubeconfig'), 'utf8')) as { clusters: { cluster: { server: string } }[] }).clusters[0]!.cluster.server);
    const database = new URL(await createTestDatabase());
    const apiRelay = await relayFromNodeIp({ host: server.hostname, port: Number(server.port) });
    const databaseRelay = await relayFromNodeIp({ host: database.hostname, port: Number(database.port) });
    relays.push(apiRelay, databaseRelay);
    database.hostname = NODE_IP;

    namespace = await createNamespace('helm');
    const secret = await kubectl(['create', 'secret', 'generic', 'berth-database', '-n', namespace, `--from-literal=DATABASE_URL=${database.toString()}`]);
    expect(secret.code, secret.stderr).toBe(0);
    const toApiServer = [
      { name: 'KUBERNETES_SERVICE_HOST', value: NODE_IP },
      { name: 'KUBERNETES_SERVICE_PORT', value: String(apiRelay.port) },
    ];
    const values = {
      image: { pullPolicy: 'Never' },
      // The node tier's setup applied the CRDs and the gvisor RuntimeClass already.
      crds: { enabled: false },
      postgresql: { existingSecret: 'berth-database' },
      apiserver: { replicas: 1, extraEnv: toApiServer },
      operator: { extraEnv: toApiServer },
    };
    writeFileSync(join(workDir, 'values.yaml'), stringify(values));
    const install = await helm(['install', RELEASE, CHART, '-n', namespace, '-f', join(workDir, 'values.yaml'), '--wait', '--timeout', '5m']);
    installed = install.code === 0;
    if (!installed) {
      const described = await kubectl(['describe', 'pods', '-n', namespace]);
      const logs = await kubectl(['logs', '-n', namespace, '-l', `app.kubernetes.io/instance=${RELEASE}`, '--tail=30', '--all-containers']);
      throw new Error(`helm install failed: ${install.stderr}\n${described.stdout.slice(-4000)}\n${logs.stdout}${logs.stderr}`);
    }
  }, 900_000);

  afterAll(async () => {
    if (installed) await helm(['uninstall', RELEASE, '-n', namespace, '--wait', '--timeout', '2m']);
    if (namespace) await kubectl(['delete', 'namespace', namespace, '--wait=false']);
    await Promise.all(relays.map((relay) => relay.close()));
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  }, 180_000);

  it('runs the API server and the operator as gVisor pods of the imported image', async () => {
    const pods = await releasePods(namespace);
    expect(pods.map((pod) => pod.metadata.labels['app.kubernetes.io/component']).sort()).toEqual(['apiserver', 'operator']);
    const sandboxes = await runscList();
    for (const pod of pods) {
      expect(pod.spec.nodeName).toBe(NODE_NAME);
      expect(pod.status.phase).toBe('Running');
      expect(pod.spec.containers[0]).toMatchObject({ image: 'berth/berth:0.1.0', imagePullPolicy: 'Never' });
      const containerId = pod.status.containerStatuses![0]!.containerID!.replace('containerd://', '');
      expect(pod.status.containerStatuses![0]!.ready).toBe(true);
      // runsc is the node's only runtime: the container is a gVisor sandbox's.
      expect(sandboxes.find((container) => container.id === containerId)?.status).toBe('running');
    }
  });

  it('serves the API from its pod: an agent becomes a gVisor pod and python and bash run in it', async () => {
    // A key as the chart's NOTES say: the CLI inside the API server's pod, exec'd through the API server and the kubelet.
    const created = await kubectl(['exec', '-n', namespace, `deploy/${FULLNAME}-apiserver`, '--', 'berth', 'keys', 'create', '--mode', 'live']);
    expect(created.code, created.stderr).toBe(0);
    const key = /key: (svc_live_\S+)/.exec(created.stdout)?.[1];
    expect(key, created.stdout).toBeDefined();
    const apiserverPod = (await releasePods(namespace)).find((pod) => pod.metadata.labels['app.kubernetes.io/component'] === 'apiserver')!;
    // The host reaches pod addresses on the node's bridge.
    api = apiClient(`http://${apiserverPod.status.podIP}:8080`, key);

    const session = await api.post('/v1/sessions', { userId: 'helm-user' });
    expect(session.status, JSON.stringify(session.body)).toBeLessThan(300);
    const agent = (await api.post(`/v1/sessions/${session.body.id}/agents`, {})).body;
    await waitForAgent(api, agent.id, 'idle', 180_000);
    const podName = (agent.id as string).replace('_', '-');
    const pod = await kubectlJson<Pod>(['get', 'pod', podName, '-n', namespace]);
    expect(pod.spec).toMatchObject({ runtimeClassName: 'gvisor', nodeName: NODE_NAME });
    const containerId = pod.status.containerStatuses![0]!.containerID!.replace('containerd://', '');
    expect((await runscList()).find((container) => container.id === containerId)?.status).toBe('running');

    const python = await api.post(`/v1/agents/${agent.id}/exec`, {
      language: 'python',
      code: 'import os\nprint(os.getuid(), os.getcwd())\nprint(open("/proc/version").read().strip())',
    });
    expect(python.status, JSON.stringify(python.body)).toBe(200);
    expect(python.body.exitCode).toBe(0);
    const [ids, kernel] = (python.body.stdout as string).trim().split('\n');
    expect(ids).toBe('1000 /workspace');
    // gVisor's kernel answers, not the host's.
    expect(kernel).not.toBe(readFileSync('/proc/version', 'utf8').trim());
    const bash = await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'dmesg | head -n 1; exit 3' });
    expect(bash.body).toMatchObject({ exitCode: 3, stdout: expect.stringMatching(/Starting gVisor\.\.\.\n$/) });

    expect((await api.post(`/v1/agents/${agent.id}/terminate`)).status).toBeLessThan(300);
    await eventually(async () => ((await kubectl(['get', 'pod', podName, '-n', namespace])).code !== 0 ? true : undefined), {
      what: 'the sandbox pod to be deleted',
      timeoutMs: 60_000,
    });
  }, 300_000);

  it('converges after the operator pod is killed: its Deployment replaces it, and an agent created meanwhile becomes a gVisor pod', async () => {
    const operatorPod = (pods: Pod[]) => pods.find((pod) => pod.metadata.labels['app.kubernetes.io/component'] === 'operator');
    const killed = operatorPod(await releasePods(namespace))!;
    const deleted = await kubectl(['delete', 'pod', killed.metadata.name, '-n', namespace, '--grace-period=0', '--force', '--wait=false']);
    expect(deleted.code, deleted.stderr).toBe(0);
    // Gone for real, not only from the API: its gVisor sandbox has ended before the agent is asked for.
    const killedContainer = killed.status.containerStatuses![0]!.containerID!.replace('containerd://', '');
    await eventually(async () => ((await runscList()).some((container) => container.id === killedContainer && container.status === 'running') ? undefined : true), {
      what: "the killed operator's sandbox to end",
      timeoutMs: 60_000,
    });
    const session = await api.post('/v1/sessions', { userId: 'helm-user-2' });
    const agent = (await api.post(`/v1/sessions/${session.body.id}/agents`, {})).body;
    await waitForAgent(api, agent.id, 'idle', 180_000);
    const replacement = operatorPod((await releasePods(namespace)).filter((pod) => pod.metadata.name !== killed.metadata.name));
    expect(replacement?.status.phase).toBe('Running');
    const podName = (agent.id as string).replace('_', '-');
    expect((await kubectlJson<Pod>(['get', 'pod', podName, '-n', namespace])).spec).toMatchObject({ runtimeClassName: 'gvisor', nodeName: NODE_NAME });
    expect((await api.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'echo converged' })).body).toMatchObject({ exitCode: 0, stdout: 'converged\n' });
    expect((await api.post(`/v1/agents/${agent.id}/terminate`)).status).toBeLessThan(300);
    await eventually(async () => ((await kubectl(['get', 'pod', podName, '-n', namespace])).code !== 0 ? true : undefined), {
      what: 'the sandbox pod to be deleted',
      timeoutMs: 60_000,
    });
  }, 300_000);

  it('helm uninstall removes Berth’s pods and their gVisor sandboxes', async () => {
    const containers = (await releasePods(namespace)).map((pod) => pod.status.containerStatuses![0]!.containerID!.replace('containerd://', ''));
    const uninstall = await helm(['uninstall', RELEASE, '-n', namespace, '--wait', '--timeout', '2m']);
    expect(uninstall.code, uninstall.stderr).toBe(0);
    installed = false;
    await eventually(async () => ((await releasePods(namespace)).length === 0 ? true : undefined), { what: "the release's pods to be gone", timeoutMs: 120_000 });
    const deployments = await kubectlJson<{ items: unknown[] }>(['get', 'deployments,services,serviceaccounts', '-n', namespace, '-l', `app.kubernetes.io/instance=${RELEASE}`]);
    expect(deployments.items).toEqual([]);
    await eventually(async () => ((await runscList()).every((container) => !containers.includes(container.id)) ? true : undefined), {
      what: 'the pods’ gVisor sandboxes to be gone',
      timeoutMs: 60_000,
    });
  }, 180_000);
});
