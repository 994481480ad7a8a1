import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createCertificateAuthority } from '../../providers/src/local/index.js';
import { eventually } from '../helpers/http.js';
import { startDnsServer } from '../helpers/dns-server.js';
import { fetchInSandbox } from '../helpers/sandbox-fetch.js';
import { kubectl, kubectlJson, startBerthInCluster, waitForAgent, type BerthInCluster } from '../cluster-tier/helpers.js';
import { startNetworkPolicyEnforcer, type NetworkPolicyEnforcer } from '../node/netpol.js';
import { NODE_IP } from '../node/node.js';
import { freePort } from '../node/node-agent-settings.js';
import { DIRECT_CONNECT, startUpstreamPod, UPSTREAM_PORTS } from '../node/upstream.js';

/**
 * Egress policies on Kubernetes (ADR 52) on the real node: an agent's gVisor pod whose only way
 * out is the egress gateway, served by `berth operator` (a host process here, listening on the
 * node IP, where the chart runs it in the operator pods behind a Service). The NetworkPolicies are
 * the chart's (egressGateway.enabled), enforced by kube-network-policies, plus one of the test's
 * that stands in for the chart's rule to the operator pods: it lets the gateway-bound pods reach
 * the gateway's host port (connections to the host's own address may not pass the enforcer's
 * forward and postrouting chains at all; the rule keeps the test from depending on that). The
 * chart's rule to the operator pods and its Service are exercised by helm-install.test.ts, which
 * installs the chart with the gateway. The outside is the upstream pod (../node/upstream.ts),
 * whose names a DNS server of the test's gives the gateway, with certificates of a CA the gateway
 * is told to trust (BERTH_EGRESS_CA_FILE) and the sandbox is not.
 */
const unavailable = inject('realNodeUnavailable');
const CHART = join(import.meta.dirname, '..', '..', 'charts', 'berth');
const TOKEN = `tok_${randomBytes(20).toString('hex')}`;
const podName = (agentId: string) => agentId.replace('_', '-');
function helmTemplate(args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(inject('helm'), ['template', 'berth', CHART, ...args], (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout))),
  );
}

describe.skipIf(unavailable !== '')('egress policies on a real node (the egress gateway)', () => {
  const upstreamCa = createCertificateAuthority('egress gateway test upstream CA');
  const records: Record<string, string> = {};
  const dir = mkdtempSync(join(tmpdir(), 'berth-egress-gateway-'));
  let dns: { address: string; close(): void };
  let enforcer: NetworkPolicyEnforcer;
  let berth: BerthInCluster;
  let gatewayPort: number;
  let sessionId: string;
  let upstreamIp: string;

  beforeAll(async () => {
    dns = await startDnsServer(records);
    const caFile = join(dir, 'upstream-ca.pem');
    writeFileSync(caFile, upstreamCa.certificatePem);
    gatewayPort = await freePort(NODE_IP);
    enforcer = await startNetworkPolicyEnforcer(inject('kubeconfig'));
    berth = await startBerthInCluster({
      prefix: 'egress',
      env: {
        BERTH_EGRESS_GATEWAY: `${NODE_IP}:${gatewayPort}`,
        BERTH_EGRESS_GATEWAY_PORT: String(gatewayPort),
        BERTH_EGRESS_GATEWAY_HOST: NODE_IP,
        BERTH_EGRESS_DNS_SERVERS: dns.address,
        BERTH_EGRESS_CA_FILE: caFile,
      },
    });
    upstreamIp = await startUpstreamPod(berth.namespace, upstreamCa, TOKEN);
    for (const name of Object.keys(UPSTREAM_PORTS)) records[name] = upstreamIp;
    sessionId = (await berth.live.post('/v1/sessions', { userId: 'egress-user' })).body.id;
    const secret = await berth.live.post('/v1/secrets', { API_TOKEN: TOKEN });
    expect(secret.status, JSON.stringify(secret.body)).toBeLessThan(300);
  });
  afterAll(async () => {
    await berth?.stop();
    await enforcer?.stop();
    dns?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lets the pod reach what its policy allows through the gateway alone, with the credential added outside it, and follows a PATCH', async () => {
    const allowed = `https://allowed.egress.test:${UPSTREAM_PORTS['allowed.egress.test']}/`;
    const other = `https://other.egress.test:${UPSTREAM_PORTS['other.egress.test']}/`;
    const created = await berth.live.post(`/v1/sessions/${sessionId}/agents`, {
      timeout: '30m',
      // The names resolve to the upstream pod's private address, which must be in cidrs as well.
      egress: { hosts: ['allowed.egress.test'], cidrs: [`${upstreamIp}/32`], credentials: [{ host: 'allowed.egress.test', secret: 'API_TOKEN' }] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const agentId = created.body.id as string;
    await waitForAgent(berth.live, agentId, 'idle', 120_000);
    const pod = await kubectlJson(['get', 'pod', podName(agentId), '-n', berth.namespace]);
    expect(pod.metadata.labels['berth.dev/egress']).toBe('gateway');
    expect(pod.spec.containers[0].env).toContainEqual({ name: 'HTTPS_PROXY', value: `http://${NODE_IP}:${gatewayPort}` });
    // The pod holds the CA's certificate, never its key, and no credential.
    expect(pod.spec.volumes.find((volume: { name: string }) => volume.name === 'egress-ca').secret.items.map((item: { key: string }) => item.key)).toEqual(['ca.pem', 'ca-bundle.pem']);
    expect(JSON.stringify(pod)).not.toContain(TOKEN);

    // No policy applies yet: the pod reaches the upstream pod straight, so what follows is the policies' doing.
    const direct = () => kubectl(['exec', '-n', berth.namespace, podName(agentId), '--', 'python3', '-c', DIRECT_CONNECT, upstreamIp, String(UPSTREAM_PORTS['allowed.egress.test'])]);
    expect((await direct()).stdout.trim()).toBe('connected');

    // The chart's policies with the gateway, and the test's rule to the gateway on the host.
    const rendered = await helmTemplate([
      '--namespace', berth.namespace,
      '--set', 'postgresql.url=postgresql://berth:secret@postgres.invalid:5432/berth',
      '--set', 'crds.enabled=false',
      '--set', 'egressGateway.enabled=true',
      '--set', `egressGateway.port=${gatewayPort}`,
      '--show-only', 'templates/networkpolicy.yaml',
    ]);
    expect((await kubectl(['apply', '-n', berth.namespace, '-f', '-'], rendered)).stderr).toBe('');
    const toHostGateway = JSON.stringify({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'egress-gateway-on-the-host' },
      spec: {
        podSelector: { matchLabels: { 'berth.dev/sandbox': 'true', 'berth.dev/egress': 'gateway' } },
        policyTypes: ['Egress'],
        egress: [{ to: [{ ipBlock: { cidr: `${NODE_IP}/32` } }], ports: [{ protocol: 'TCP', port: gatewayPort }] }],
      },
    });
    expect((await kubectl(['apply', '-n', berth.namespace, '-f', '-'], toHostGateway)).stderr).toBe('');

    // A connection that bypasses the proxy is refused, to the very server the gateway reaches for it.
    await eventually(async () => ((await direct()).code !== 0 ? true : undefined), { what: 'the direct connection refused', timeoutMs: 60_000, intervalMs: 500 });
    expect((await direct()).stderr).toMatch(/timed out/);

    // Through the gateway: the allowed host, TLS terminated with the sandbox's CA (which it trusts
    // through SSL_CERT_FILE), the bound credential added by the gateway.
    expect(await fetchInSandbox(berth.live, agentId, allowed)).toBe('200 allowed.egress.test authorized');
    // Another host the policy does not name is refused by the gateway, with its reason.
    expect(await fetchInSandbox(berth.live, agentId, other)).toMatch(/^error .*403 berth egress: other\.egress\.test is not in the agent's egress hosts/);

    // The credential is in no environment and no process of the sandbox.
    const look = await berth.live.post(`/v1/agents/${agentId}/exec`, {
      language: 'bash',
      code: 'env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr "\\0" "\\n" < "$f"; done 2>/dev/null; echo scanned',
    });
    expect(look.body.stdout).toContain(`HTTPS_PROXY=http://${NODE_IP}:${gatewayPort}`);
    expect(look.body.stdout).toContain('scanned');
    expect(look.body.stdout).not.toContain(TOKEN);

    // A new policy while the pod runs: the gateway follows it without a restart. The new host has
    // no credential, so its tunnel is passed through, TLS end to end: the sandbox checks the
    // upstream's own certificate, with the upstream CA given to it in the workspace.
    const upstreamCaFile = '/workspace/upstream-ca.pem';
    await berth.live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: `cat > ${upstreamCaFile} <<'EOF'\n${upstreamCa.certificatePem}EOF` });
    const patched = await berth.live.patch(`/v1/agents/${agentId}`, { egress: { hosts: ['other.egress.test'], cidrs: [`${upstreamIp}/32`] } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await eventually(async () => ((await fetchInSandbox(berth.live, agentId, other, upstreamCaFile)).startsWith('200 ') ? true : undefined), {
      what: 'the patched policy at the gateway',
      timeoutMs: 30_000,
      intervalMs: 500,
    });
    expect(await fetchInSandbox(berth.live, agentId, other, upstreamCaFile)).toBe('200 other.egress.test anonymous');
    expect(await fetchInSandbox(berth.live, agentId, allowed)).toMatch(/^error .*403 berth egress: allowed\.egress\.test is not in the agent's egress hosts/);
    const restarted = await kubectlJson(['get', 'pod', podName(agentId), '-n', berth.namespace]);
    expect(restarted.metadata.uid).toBe(pod.metadata.uid);
    expect(restarted.status.containerStatuses[0].restartCount).toBe(0);

    // The enforcer decided on the pod's connections.
    expect(enforcer.output()).toContain(pod.status.podIP);
  });
});
