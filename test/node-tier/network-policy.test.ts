import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { createNamespace, kubectl, kubectlJson } from '../cluster-tier/helpers.js';
import { startNetworkPolicyEnforcer, type NetworkPolicyEnforcer } from '../node/netpol.js';
import { serverPodManifest } from '../node/sandbox-images.js';

/**
 * The chart's sandbox NetworkPolicy enforced on the real node (kube-network-policies, see
 * test/node/netpol.ts): a sandbox pod and a plain pod, both under gVisor, each serving HTTP.
 * Without the policy they reach each other, so the network works; with it the sandbox can
 * neither reach the other pod nor be reached; once `networkPolicy.allowedCIDRs` names the other
 * pod, the sandbox reaches it again while nothing may still connect to the sandbox. With the
 * enforcer stopped, the bridge alone lets everything through again.
 */
const unavailable = inject('realNodeUnavailable');
const CHART = join(import.meta.dirname, '..', '..', 'charts', 'berth');
const PORT = 8080;
// Connects, sends a request and prints the status line; exits non-zero when it cannot connect.
const PROBE = [
  'import socket, sys',
  `s = socket.create_connection((sys.argv[1], ${PORT}), timeout=3)`,
  's.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")',
  'print(s.recv(64).decode().splitlines()[0])',
].join('\n');

function runscList(): Promise<{ id: string; status: string }[]> {
  return new Promise((resolve, reject) =>
    execFile('/usr/local/bin/runsc', [`--root=${inject('runscRoot')}`, 'list', '--format=json'], (error, stdout, stderr) =>
      error ? reject(new Error(stderr)) : resolve(JSON.parse(stdout) ?? []),
    ),
  );
}

function helmTemplate(args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(inject('helm'), ['template', 'berth', CHART, ...args], (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout))),
  );
}

function servingPod(name: string, labels: Record<string, string>) {
  return serverPodManifest({ name, labels, command: ['python3', '-m', 'http.server', String(PORT), '--bind', '0.0.0.0', '--directory', '/tmp'], readyPort: PORT });
}

describe.skipIf(unavailable !== '')('the sandbox NetworkPolicy on a real node', () => {
  let enforcer: NetworkPolicyEnforcer;
  let namespace: string;
  let sandboxIp: string;
  let otherIp: string;

  /** Whether pod `from` gets an HTTP answer from `ip`, by a connection made inside its sandbox. */
  async function reaches(from: string, ip: string): Promise<boolean> {
    const result = await kubectl(['exec', '-n', namespace, from, '--', 'python3', '-c', PROBE, ip]);
    if (result.code === 0) {
      expect(result.stdout.trim()).toMatch(/^HTTP\/1\.0 200/);
      return true;
    }
    // Refused by the policy means no connection within the timeout, nothing else.
    expect(result.stderr).toMatch(/timed out/);
    return false;
  }

  async function applySandboxPolicy(values: string[]) {
    const rendered = await helmTemplate([
      '--namespace', namespace,
      '--set', 'postgresql.url=postgresql://berth:secret@postgres.invalid:5432/berth',
      '--set', 'crds.enabled=false',
      '--show-only', 'templates/networkpolicy.yaml',
      ...values,
    ]);
    const applied = await kubectl(['apply', '-n', namespace, '-f', '-'], rendered);
    expect(applied.stderr).toBe('');
  }

  beforeAll(async () => {
    enforcer = await startNetworkPolicyEnforcer(inject('kubeconfig'));
    namespace = await createNamespace('netpol');
    for (const [name, labels] of [
      ['sandbox', { 'berth.dev/sandbox': 'true' }],
      ['other', { app: 'other' }],
    ] as const) {
      const created = await kubectl(['apply', '-n', namespace, '-f', '-'], servingPod(name, labels));
      expect(created.code, created.stderr).toBe(0);
    }
    const ready = await kubectl(['wait', '-n', namespace, '--for=condition=Ready', '--timeout=120s', 'pod/sandbox', 'pod/other']);
    expect(ready.code, ready.stderr).toBe(0);
    sandboxIp = (await kubectlJson(['get', 'pod', 'sandbox', '-n', namespace])).status.podIP;
    otherIp = (await kubectlJson(['get', 'pod', 'other', '-n', namespace])).status.podIP;
  });
  afterAll(async () => {
    if (namespace) await kubectl(['delete', 'namespace', namespace, '--wait=false']);
    await enforcer?.stop();
  });

  it('refuses what the policy refuses and allows what allowedCIDRs adds, for gVisor pods', async () => {
    expect(sandboxIp).toMatch(/^10\.245\.0\.\d+$/);
    expect(otherIp).toMatch(/^10\.245\.0\.\d+$/);
    // Both are gVisor sandboxes: the policy holds outside them, on the host side of their veths.
    const running = await runscList();
    for (const name of ['sandbox', 'other']) {
      const pod = await kubectlJson(['get', 'pod', name, '-n', namespace]);
      const containerId = pod.status.containerStatuses[0].containerID.replace('containerd://', '');
      expect(running.find((container) => container.id === containerId)?.status).toBe('running');
    }
    // No policy yet: both ways work, so what follows is the policy's doing, not a broken network.
    expect(await reaches('sandbox', otherIp)).toBe(true);
    expect(await reaches('other', sandboxIp)).toBe(true);

    // The chart's defaults: public addresses and cluster DNS only; pod addresses are private.
    await applySandboxPolicy([]);
    await eventually(async () => ((await reaches('sandbox', otherIp)) ? undefined : true), { what: 'egress to the pod network refused', timeoutMs: 60_000, intervalMs: 500 });
    expect(await reaches('other', sandboxIp)).toBe(false);
    // The policy selects sandboxes only: the other pod still serves the host.
    const fromOther = await kubectl(['exec', '-n', namespace, 'other', '--', 'python3', '-c', PROBE, otherIp]);
    expect(fromOther.stdout.trim()).toMatch(/^HTTP\/1\.0 200/);

    // An explicit exception opens egress to that address; ingress to the sandbox stays closed.
    await applySandboxPolicy(['--set', `networkPolicy.allowedCIDRs={${otherIp}/32}`]);
    await eventually(async () => ((await reaches('sandbox', otherIp)) ? true : undefined), { what: 'egress to the allowed address', timeoutMs: 60_000, intervalMs: 500 });
    expect(await reaches('other', sandboxIp)).toBe(false);

    // The enforcer decided, in its own words, for connections of the sandbox pod.
    expect(enforcer.output()).toContain(sandboxIp);
    // And it alone: stopped (its table removed), the policy still in place refuses nothing.
    await enforcer.stop();
    expect(await reaches('other', sandboxIp)).toBe(true);
  });
});
