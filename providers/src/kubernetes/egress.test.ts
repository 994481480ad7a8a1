import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { createCertificateAuthority } from '../local/egress/certificates.js';
import { caOfSecret, egressCaSecret, sandboxOfAddress, serviceOfGatewayHost } from './egress.js';

function pod(name: string, ip: string, options: { labels?: Record<string, string>; phase?: string; deleting?: boolean; ips?: string[] } = {}): V1Pod {
  return {
    metadata: {
      name,
      labels: options.labels ?? { 'berth.dev/sandbox': 'true', 'berth.dev/agent': name, 'berth.dev/egress': 'gateway' },
      ...(options.deleting ? { deletionTimestamp: new Date() } : {}),
    },
    status: { phase: options.phase ?? 'Running', podIP: ip, podIPs: (options.ips ?? [ip]).map((entry) => ({ ip: entry })) },
  };
}

describe('sandboxOfAddress', () => {
  const pods = [
    pod('agt-a', '10.245.0.5'),
    pod('agt-b', '10.245.0.6', { ips: ['10.245.0.6', 'fd00::6'] }),
    pod('agt-pending', '10.245.0.7', { phase: 'Pending' }),
    pod('agt-gone', '10.245.0.8', { deleting: true }),
    pod('agt-direct', '10.245.0.9', { labels: { 'berth.dev/sandbox': 'true', 'berth.dev/agent': 'agt-direct' } }),
    pod('not-a-sandbox', '10.245.0.10', { labels: { 'berth.dev/egress': 'gateway', 'berth.dev/agent': 'x' } }),
  ];

  it.each([
    ['10.245.0.5', 'agt-a'],
    // How a dual-stack listener sees an IPv4 peer.
    ['::ffff:10.245.0.5', 'agt-a'],
    ['fd00::6', 'agt-b'],
    ['10.245.0.6', 'agt-b'],
    // Not running, being deleted (its address may already be another pod's), not bound to the gateway, not a sandbox.
    ['10.245.0.7', undefined],
    ['10.245.0.8', undefined],
    ['10.245.0.9', undefined],
    ['10.245.0.10', undefined],
    ['10.245.0.99', undefined],
    ['not an address', undefined],
  ])('maps %s to %s', (address, agent) => {
    expect(sandboxOfAddress(pods, address)).toBe(agent);
  });
});

describe('the egress CA Secret', () => {
  it('holds the CA for the gateway and names the files the pod mounts', () => {
    const ca = createCertificateAuthority('Berth sandbox agt_1');
    const owner = { apiVersion: 'berth.dev/v1alpha1', kind: 'Agent', name: 'agt-1', uid: 'u-1' };
    const secret = egressCaSecret('agt-1', 'sandboxes', ca, owner);
    expect(secret.metadata).toMatchObject({ name: 'agt-1-egress-ca', namespace: 'sandboxes', ownerReferences: [{ ...owner, blockOwnerDeletion: true }] });
    expect(Object.keys(secret.stringData!).sort()).toEqual(['ca-bundle.pem', 'ca-key.pem', 'ca.pem']);
    expect(secret.stringData!['ca-bundle.pem']).toContain(ca.certificatePem);
    // As the API server gives it back: base64 data.
    const read = { data: Object.fromEntries(Object.entries(secret.stringData!).map(([key, value]) => [key, Buffer.from(value).toString('base64')])) };
    expect(caOfSecret(read)).toEqual(ca);
    expect(caOfSecret({ data: { 'ca.pem': read.data['ca.pem']! } })).toBeUndefined();
  });
});

describe('serviceOfGatewayHost', () => {
  it.each([
    ['berth-egress.berth.svc', { name: 'berth-egress', namespace: 'berth' }],
    ['berth-egress.berth.svc.cluster.local', { name: 'berth-egress', namespace: 'berth' }],
    ['berth-egress.berth.svc.cluster.local.', { name: 'berth-egress', namespace: 'berth' }],
    ['berth-egress.berth', undefined],
    ['gateway.example.com', undefined],
    ['10.0.0.5', undefined],
    ['Berth-Egress.berth.svc', undefined],
    ['a.b.c.svc', undefined],
  ])('%s names %o', (host, service) => {
    expect(serviceOfGatewayHost(host)).toEqual(service);
  });
});
