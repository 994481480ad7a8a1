import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createCertificateAuthority } from '../../providers/src/local/index.js';
import { startDnsServer } from '../helpers/dns-server.js';
import { apiClient, eventually, type ApiClient } from '../helpers/http.js';
import { fetchInSandbox } from '../helpers/sandbox-fetch.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { createNamespace, kubectl, kubectlJson, waitForAgent } from '../cluster-tier/helpers.js';
import { berthImage } from '../node/berth-image.js';
import { importImage, ociLayout } from '../node/images.js';
import { startNetworkPolicyEnforcer } from '../node/netpol.js';
import { NODE_IP, NODE_NAME } from '../node/node.js';
import { relayFromNodeIp, type NodeRelay } from '../node/relay.js';
import { sandboxNodeImages } from '../node/sandbox-images.js';
import { DIRECT_CONNECT, startUpstreamPod, UPSTREAM_PORTS } from '../node/upstream.js';

/**
 * The chart installed onto the real node as a customer installs it: `helm install` with Berth's own
 * image (built here from a root filesystem and imported into the node's containerd, pullPolicy
 * Never), the API server and operator as gVisor pods, an agent created through the installed API
 * server becoming a gVisor pod that runs python, and `helm uninstall` removing Berth's pods.
 *
 * With the egress gateway (egressGateway.enabled, ADR 52): an agent with an egress policy reaches
 * the outside through the operator pod behind the Service `<release>-berth-egress`, whose ClusterIP
 * kube-proxy routes on the node, with the chart's NetworkPolicies enforced (kube-network-policies);
 * the gateway names the sandbox by the connection's source pod IP. The outside is the upstream pod
 * (../node/upstream.ts), whose names a DNS server of the test's on the node IP gives the operator,
 * with certificates of a CA the operator trusts (BERTH_EGRESS_CA_FILE, a ConfigMap mounted through
 * operator.extraVolumes) and the sandbox does not.
 *
 * What the test cluster lacks and a customer's has (ADR 48): a `kubernetes` Service that routes
 * from pods (its endpoint is the API server on loopback), so the pods are pointed at the API server
 * on the node IP through KUBERNETES_SERVICE_HOST/PORT (extraEnv); cluster DNS, so the database is an external
 * DATABASE_URL naming the node IP. Both servers listen on loopback; relays on the node IP reach them.
 */
const unavailable = inject('realNodeUnavailable');
const RELEASE = 'hel';
const FULLNAME = `${RELEASE}-berth`;
const IMAGE = 'docker.io/berth/berth:0.1.0';
const CHART = join(import.meta.dirname, '..', '..', 'charts', 'berth');
const NODE_IMAGE_CACHE = join(process.env.BERTH_NODE_CACHE ?? '/var/cache/berth/node', 'images');
const TOKEN = `tok_${randomBytes(20).toString('hex')}`;
const UPSTREAM_CA_DIR = '/etc/berth-test';

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
  const upstreamCa = createCertificateAuthority('helm install test upstream CA');
  const records: Record<string, string> = {};
  let dns: { address: string; close(): void } | undefined;
  let upstreamIp: string;

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
    // The outside of the egress test: its pod, its names on a DNS server the operator pod reaches,
    // its CA in a ConfigMap the operator mounts.
    upstreamIp = await startUpstreamPod(namespace, upstreamCa, TOKEN);
    for (const name of Object.keys(UPSTREAM_PORTS)) records[name] = upstreamIp;
    dns = await startDnsServer(records, NODE_IP);
    writeFileSync(join(workDir, 'ca.pem'), upstreamCa.certificatePem);
    const caMap = await kubectl(['create', 'configmap', 'upstream-ca', '-n', namespace, `--from-file=ca.pem=${join(workDir, 'ca.pem')}`]);
    expect(caMap.code, caMap.stderr).toBe(0);
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
      operator: {
        extraEnv: [
          ...toApiServer,
          { name: 'BERTH_EGRESS_DNS_SERVERS', value: dns.address },
          { name: 'BERTH_EGRESS_CA_FILE', value: `${UPSTREAM_CA_DIR}/ca.pem` },
        ],
        extraVolumes: [{ name: 'upstream-ca', configMap: { name: 'upstream-ca' } }],
        extraVolumeMounts: [{ name: 'upstream-ca', mountPath: UPSTREAM_CA_DIR, readOnly: true }],
      },
      egressGateway: { enabled: true },
      // The chart's NetworkPolicies, told where this cluster's API server and database are (the
      // relays on the node IP) and letting the operator reach the test's DNS server and upstream pod.
      networkPolicy: {
        kubeApiServer: { cidrs: [`${NODE_IP}/32`], ports: [apiRelay.port] },
        externalDatabase: { cidrs: [`${NODE_IP}/32`], port: databaseRelay.port },
        operator: {
          extraEgress: [
            { to: [{ ipBlock: { cidr: `${NODE_IP}/32` } }], ports: [{ protocol: 'UDP', port: Number(dns.address.split(':')[1]) }] },
            { to: [{ podSelector: { matchLabels: { app: 'upstream' } } }], ports: Object.values(UPSTREAM_PORTS).map((port) => ({ protocol: 'TCP', port })) },
          ],
        },
      },
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
    dns?.close();
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

  it('carries an egress policy through the operator pod behind its Service: the allowed host with the credential added, another refused, no way around it', async () => {
    const secret = await api.post('/v1/secrets', { API_TOKEN: TOKEN });
    expect(secret.status, JSON.stringify(secret.body)).toBeLessThan(300);
    const session = await api.post('/v1/sessions', { userId: 'helm-egress-user' });
    const created = await api.post(`/v1/sessions/${session.body.id}/agents`, {
      // The names resolve to the upstream pod's private address, which must be in cidrs as well.
      egress: { hosts: ['allowed.egress.test'], cidrs: [`${upstreamIp}/32`], credentials: [{ host: 'allowed.egress.test', secret: 'API_TOKEN' }] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const agentId = created.body.id as string;
    await waitForAgent(api, agentId, 'idle', 180_000);
    const podName = agentId.replace('_', '-');
    const pod = await kubectlJson<Pod & { spec: { containers: { env?: { name: string; value?: string }[] }[] } }>(['get', 'pod', podName, '-n', namespace]);
    // The proxy is the Service's ClusterIP, which the operator read from the API server: no DNS anywhere.
    const service = await kubectlJson<{ spec: { clusterIP: string } }>(['get', 'service', `${FULLNAME}-egress`, '-n', namespace]);
    expect(pod.spec.containers[0]!.env).toContainEqual({ name: 'HTTPS_PROXY', value: `http://${service.spec.clusterIP}:3128` });
    const operatorPod = (await releasePods(namespace)).find((candidate) => candidate.metadata.labels['app.kubernetes.io/component'] === 'operator')!;
    expect(service.spec.clusterIP).not.toBe(operatorPod.status.podIP);

    const direct = () => kubectl(['exec', '-n', namespace, podName, '--', 'python3', '-c', DIRECT_CONNECT, upstreamIp, String(UPSTREAM_PORTS['allowed.egress.test'])]);
    const enforcer = await startNetworkPolicyEnforcer(inject('kubeconfig'));
    try {
      // The chart's policies hold: the pod cannot go around the gateway to the very server it reaches through it.
      await eventually(async () => ((await direct()).code !== 0 ? true : undefined), { what: 'the direct connection refused', timeoutMs: 60_000, intervalMs: 500 });
      // Through kube-proxy's ClusterIP to the operator pod, which knows the sandbox by its pod IP:
      // the allowed host, TLS terminated with the sandbox's CA, the bound credential added there.
      expect(await fetchInSandbox(api, agentId, `https://allowed.egress.test:${UPSTREAM_PORTS['allowed.egress.test']}/`)).toBe('200 allowed.egress.test authorized');
      expect(await fetchInSandbox(api, agentId, `https://other.egress.test:${UPSTREAM_PORTS['other.egress.test']}/`)).toMatch(
        /^error .*403 berth egress: other\.egress\.test is not in the agent's egress hosts/,
      );
      // The enforcer decided on the pod's connection to the operator pod behind the ClusterIP.
      expect(enforcer.output()).toContain(pod.status.podIP);
    } finally {
      await enforcer.stop();
    }
    const look = await api.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'env; echo scanned' });
    expect(look.body.stdout).toContain('scanned');
    expect(look.body.stdout).not.toContain(TOKEN);
    expect((await api.post(`/v1/agents/${agentId}/terminate`)).status).toBeLessThan(300);
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
