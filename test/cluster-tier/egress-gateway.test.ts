import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { freePort } from '../node/node-agent-settings.js';
import { kubectl, kubectlJson, startBerthInCluster, waitForAgent, type BerthInCluster } from './helpers.js';

/**
 * The objects of egress policies on Kubernetes (ADR 52) against a real API server, pods on KWOK
 * nodes: the gateway-bound pod, its CA Secret, a PATCH, the Secret's end with the agent, and the
 * operator's gateway refusing a source that is no sandbox. What the pod can reach is the node
 * tier's (test/node-tier/egress-gateway.test.ts): KWOK pods run nothing.
 */
const TOKEN = `tok_${randomBytes(16).toString('hex')}`;
const podName = (agentId: string) => agentId.replace('_', '-');
let berth: BerthInCluster;
let gatewayPort: number;

beforeAll(async () => {
  gatewayPort = await freePort('127.0.0.1');
  berth = await startBerthInCluster({
    prefix: 'egress',
    env: { BERTH_EGRESS_GATEWAY: `127.0.0.1:${gatewayPort}`, BERTH_EGRESS_GATEWAY_PORT: String(gatewayPort) },
  });
});
afterAll(async () => {
  await berth?.stop();
});

/** A CONNECT to the gateway from this host: the status line it answers. */
function connectThroughGateway(authority: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: gatewayPort, method: 'CONNECT', path: authority, agent: false });
    req.once('connect', (answer, socket) => {
      socket.destroy();
      resolve(`${answer.statusCode} ${answer.statusMessage}`);
    });
    req.once('error', reject);
    req.end();
  });
}

describe('egress policies with the egress gateway', () => {
  it('gives the pod the gateway, its CA certificate from a Secret the Agent owns, and no credential; PATCH is taken; terminate removes the Secret', async () => {
    const sessionId = (await berth.live.post('/v1/sessions', { userId: 'egress-objects' })).body.id;
    expect((await berth.live.post('/v1/secrets', { API_TOKEN: TOKEN })).status).toBeLessThan(300);
    const created = await berth.live.post(`/v1/sessions/${sessionId}/agents`, {
      timeout: '30m',
      egress: { hosts: ['api.example.com'], credentials: [{ host: 'api.example.com', secret: 'API_TOKEN' }] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const agentId = created.body.id as string;
    await waitForAgent(berth.live, agentId, 'idle');
    const pod = await kubectlJson(['get', 'pod', podName(agentId), '-n', berth.namespace]);
    const agent = await kubectlJson(['get', 'agent', podName(agentId), '-n', berth.namespace]);
    expect(pod.metadata.labels).toMatchObject({ 'berth.dev/sandbox': 'true', 'berth.dev/egress': 'gateway' });
    const env = Object.fromEntries(pod.spec.containers[0].env.map((variable: { name: string; value: string }) => [variable.name, variable.value]));
    expect(env).toMatchObject({ HTTPS_PROXY: `http://127.0.0.1:${gatewayPort}`, SSL_CERT_FILE: '/run/berth/egress/ca-bundle.pem' });
    expect(JSON.stringify(pod)).not.toContain(TOKEN);

    const secretName = `${podName(agentId)}-egress-ca`;
    const secret = await kubectlJson(['get', 'secret', secretName, '-n', berth.namespace]);
    expect(secret.metadata.ownerReferences).toEqual([expect.objectContaining({ kind: 'Agent', name: podName(agentId), uid: agent.metadata.uid })]);
    expect(Object.keys(secret.data).sort()).toEqual(['ca-bundle.pem', 'ca-key.pem', 'ca.pem']);
    expect(Buffer.from(secret.data['ca.pem'], 'base64').toString()).toMatch(/^-----BEGIN CERTIFICATE-----/);
    // The pod mounts the certificate and the bundle, never the key.
    expect(pod.spec.volumes).toContainEqual({
      name: 'egress-ca',
      secret: { secretName, defaultMode: 0o444, items: [{ key: 'ca.pem', path: 'ca.pem' }, { key: 'ca-bundle.pem', path: 'ca-bundle.pem' }] },
    });

    const patched = await berth.live.patch(`/v1/agents/${agentId}`, { egress: { hosts: ['pypi.org'] } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect((await kubectlJson(['get', 'agent', podName(agentId), '-n', berth.namespace])).spec.egress).toEqual({ hosts: ['pypi.org'], cidrs: [], credentials: [] });
    // The pod is not made again for a new policy: the gateway reads it.
    expect((await kubectlJson(['get', 'pod', podName(agentId), '-n', berth.namespace])).metadata.uid).toBe(pod.metadata.uid);

    expect((await berth.live.post(`/v1/agents/${agentId}/terminate`)).status).toBe(200);
    await eventually(async () => ((await kubectl(['get', 'secret', secretName, '-n', berth.namespace])).code !== 0 ? true : undefined), {
      what: 'the CA Secret to be deleted',
    });
  });

  it('is served by the operator, and refuses a source that is no sandbox pod', async () => {
    expect(await connectThroughGateway('api.example.com:443')).toBe('403 berth egress: 127.0.0.1 is not a sandbox with an egress policy; nothing may be reached');
  });
});
