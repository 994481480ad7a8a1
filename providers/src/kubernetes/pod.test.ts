import { describe, expect, it } from 'vitest';
import { DEFAULT_GPU_TABLE } from '@berth/common';
import { adoptionPatch, desiredPod, desiredWarmPod, podNameOf, type PodAdoption, type PodRequest, type PodSettings } from './pod.js';
import { podState } from './provider.js';
import { exitCodeOf } from './exec.js';

const settings: PodSettings = {
  namespace: 'berth',
  runtimeClassName: 'gvisor',
  images: { python: 'berth/sandbox-python:1', node: 'berth/sandbox-node:1', go: 'berth/sandbox-go:1' },
  browserImage: 'berth/sandbox-browser:1',
  gpuTable: DEFAULT_GPU_TABLE,
  cpuRequest: 0.25,
  cpuLimit: 2,
  memoryRequestBytes: 256 * 1024 ** 2,
  memoryLimitBytes: 1024 ** 3,
  workspaceSizeBytes: 10 * 1024 ** 3,
};

const request: PodRequest = {
  name: 'agt-01abc',
  sessionName: 'ses-01xyz',
  compute: 'python',
  browser: false,
  timeoutSeconds: 900,
  envSecret: 'agt-1-env',
  owner: { apiVersion: 'berth.dev/v1alpha1', kind: 'Agent', name: 'agt-01abc', uid: 'u-1' },
};

describe('desiredPod', () => {
  it('builds the sandbox pod of a python agent', () => {
    const pod = desiredPod(request, settings);
    expect(pod.metadata).toEqual({
      name: 'agt-01abc',
      namespace: 'berth',
      labels: {
        'app.kubernetes.io/name': 'berth-sandbox',
        'app.kubernetes.io/managed-by': 'berth',
        'berth.dev/sandbox': 'true',
        'berth.dev/agent': 'agt-01abc',
        'berth.dev/session': 'ses-01xyz',
      },
      ownerReferences: [{ apiVersion: 'berth.dev/v1alpha1', kind: 'Agent', name: 'agt-01abc', uid: 'u-1', controller: true, blockOwnerDeletion: true }],
    });
    const spec = pod.spec!;
    expect(spec).toMatchObject({
      runtimeClassName: 'gvisor',
      restartPolicy: 'Never',
      activeDeadlineSeconds: 900,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
    });
    expect(spec.nodeSelector).toBeUndefined();
    expect(spec.tolerations).toBeUndefined();
    const [container] = spec.containers;
    expect(container).toMatchObject({
      name: 'sandbox',
      image: 'berth/sandbox-python:1',
      workingDir: '/workspace',
      envFrom: [{ secretRef: { name: 'agt-1-env' } }],
      resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '2000m', memory: '1024Mi' } },
      securityContext: { allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ['ALL'] } },
      // /tmp is the sandbox's own (its root filesystem's writable layer), not a volume: a native
      // checkpoint keeps it, and with it the files a program holds open there (a bash script).
      volumeMounts: [{ name: 'workspace', mountPath: '/workspace' }],
    });
    expect(spec.volumes).toEqual([{ name: 'workspace', emptyDir: { sizeLimit: '10240Mi' } }]);
  });

  it.each([
    ['node', 'berth/sandbox-node:1'],
    ['go', 'berth/sandbox-go:1'],
  ] as const)('uses the %s image for %s agents', (compute, image) => {
    expect(desiredPod({ ...request, compute }, settings).spec!.containers[0]!.image).toBe(image);
  });

  it('uses the browser image for browser agents', () => {
    expect(desiredPod({ ...request, browser: true }, settings).spec!.containers[0]!.image).toBe('berth/sandbox-browser:1');
    expect(() => desiredPod({ ...request, browser: true }, { ...settings, browserImage: undefined })).toThrow(/browser image/);
  });

  it('maps a GPU type through the table to node selectors, tolerations and device limits', () => {
    const spec = desiredPod({ ...request, gpu: 'a100' }, settings).spec!;
    expect(spec.nodeSelector).toEqual({ 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB' });
    expect(spec.tolerations).toEqual([{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }]);
    expect(spec.containers[0]!.resources).toMatchObject({ limits: { 'nvidia.com/gpu': '1' }, requests: { 'nvidia.com/gpu': '1' } });
    expect(() => desiredPod({ ...request, gpu: 'tpu' }, settings)).toThrow(/not in the GPU table/);
  });

  it('leaves out the runtime class and the owner when they are not given', () => {
    const pod = desiredPod({ ...request, owner: undefined }, { ...settings, runtimeClassName: undefined });
    expect(pod.spec!.runtimeClassName).toBeUndefined();
    expect(pod.metadata!.ownerReferences).toBeUndefined();
  });

  it('pins a pod for a native restore to the checkpoint node and holds it behind the restore gate', () => {
    const pod = desiredPod({ ...request, nativeRestore: { node: 'node-a', key: 'snapshots/snap_1.tar.gz' } }, settings);
    expect(pod.metadata!.annotations).toEqual({ 'berth.dev/restore-key': 'snapshots/snap_1.tar.gz', 'berth.dev/restore-node': 'node-a' });
    expect(pod.spec!.schedulingGates).toEqual([{ name: 'berth.dev/native-restore' }]);
    expect(pod.spec!.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms).toEqual([
      { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['node-a'] }] },
    ]);
    // Everything the sandbox sees is the same as without a restore: runsc refuses a changed container.
    expect(pod.spec!.containers).toEqual(desiredPod(request, settings).spec!.containers);
    const plain = desiredPod(request, settings);
    expect(plain.metadata!.annotations).toBeUndefined();
    expect(plain.spec!.schedulingGates).toBeUndefined();
    expect(plain.spec!.affinity).toBeUndefined();
  });

  it('points a pod with an egress policy at the gateway, with its CA certificate and the label its NetworkPolicy selects', () => {
    const pod = desiredPod({ ...request, egress: { proxyUrl: 'http://10.96.0.20:3128', caSecret: 'agt-01abc-egress-ca' } }, settings);
    expect(pod.metadata!.labels).toMatchObject({ 'berth.dev/sandbox': 'true', 'berth.dev/egress': 'gateway' });
    const [container] = pod.spec!.containers;
    const env = Object.fromEntries(container!.env!.map((variable) => [variable.name, variable.value]));
    expect(env).toEqual({
      HTTP_PROXY: 'http://10.96.0.20:3128',
      HTTPS_PROXY: 'http://10.96.0.20:3128',
      http_proxy: 'http://10.96.0.20:3128',
      https_proxy: 'http://10.96.0.20:3128',
      NO_PROXY: 'localhost,127.0.0.1,::1',
      no_proxy: 'localhost,127.0.0.1,::1',
      SSL_CERT_FILE: '/run/berth/egress/ca-bundle.pem',
      REQUESTS_CA_BUNDLE: '/run/berth/egress/ca-bundle.pem',
      CURL_CA_BUNDLE: '/run/berth/egress/ca-bundle.pem',
      GIT_SSL_CAINFO: '/run/berth/egress/ca-bundle.pem',
      NODE_EXTRA_CA_CERTS: '/run/berth/egress/ca.pem',
    });
    // The agent's secrets stay in envFrom; env, which wins over it, holds no value of theirs.
    expect(container!.envFrom).toEqual([{ secretRef: { name: 'agt-1-env' } }]);
    expect(container!.volumeMounts).toContainEqual({ name: 'egress-ca', mountPath: '/run/berth/egress', readOnly: true });
    // The certificate and the bundle only: the CA's key stays in the Secret, for the gateway.
    expect(pod.spec!.volumes).toContainEqual({
      name: 'egress-ca',
      secret: {
        secretName: 'agt-01abc-egress-ca',
        defaultMode: 0o444,
        items: [
          { key: 'ca.pem', path: 'ca.pem' },
          { key: 'ca-bundle.pem', path: 'ca-bundle.pem' },
        ],
      },
    });
    // Without a policy: no label, no proxy, no CA; the install's sandbox NetworkPolicy applies.
    const plain = desiredPod(request, settings);
    expect(plain.metadata!.labels!['berth.dev/egress']).toBeUndefined();
    expect(plain.spec!.containers[0]!.env).toBeUndefined();
    expect(plain.spec!.volumes!.map((volume) => volume.name)).not.toContain('egress-ca');
  });

  it('is pure', () => {
    expect(desiredPod(request, settings)).toEqual(desiredPod(request, settings));
  });
});

describe('desiredWarmPod', () => {
  const warm = { name: 'wsb-01warm', compute: 'python', browser: false, guestConfigMap: 'berth-guest-abc' } as const;

  it('is a sandbox pod with the launcher, labelled warm, with no agent, session, secrets, deadline or owner', () => {
    const pod = desiredWarmPod(warm, settings);
    expect(pod.metadata).toEqual({
      name: 'wsb-01warm',
      namespace: 'berth',
      labels: { 'app.kubernetes.io/name': 'berth-sandbox', 'app.kubernetes.io/managed-by': 'berth', 'berth.dev/sandbox': 'true', 'berth.dev/warm': 'true' },
    });
    expect(pod.spec!.activeDeadlineSeconds).toBeUndefined();
    const [container] = pod.spec!.containers;
    expect(container!.envFrom).toBeUndefined();
    expect(container!.env).toBeUndefined();
    expect(container!.command?.[2]).toMatch(/launcher\.py/);
    // Everything else is an agent's pod: the chart's NetworkPolicy and the pod's limits hold alike.
    const agents = desiredPod({ name: 'wsb-01warm', compute: 'python', browser: false, guestConfigMap: 'berth-guest-abc', sessionName: 's', timeoutSeconds: 60 }, settings);
    expect(pod.spec!.containers).toEqual(agents.spec!.containers);
    expect({ ...pod.spec, activeDeadlineSeconds: 60 }).toEqual(agents.spec);
  });

  it('takes the image of its compute, or the browser image', () => {
    expect(desiredWarmPod({ ...warm, compute: 'go' }, settings).spec!.containers[0]!.image).toBe('berth/sandbox-go:1');
    expect(desiredWarmPod({ ...warm, browser: true }, settings).spec!.containers[0]!.image).toBe('berth/sandbox-browser:1');
  });
});

describe('adoptionPatch', () => {
  const adoption: PodAdoption = {
    agentName: 'agt-01abc',
    sessionName: 'ses-01xyz',
    warmId: 'wsb_01warm',
    timeoutSeconds: 900,
    owner: { apiVersion: 'berth.dev/v1alpha1', kind: 'Agent', name: 'agt-01abc', uid: 'u-1' },
  };
  const warmPod = { ...desiredWarmPod({ name: 'wsb-01warm', compute: 'python', browser: false, guestConfigMap: 'g' }, settings), status: { startTime: new Date('2026-11-28T02:00:00Z') } };

  it("gives the pod the agent's labels, owner and a deadline counted from the pod's start", () => {
    expect(adoptionPatch(warmPod, adoption, new Date('2026-11-28T02:05:00.200Z'))).toEqual({
      metadata: {
        labels: { 'berth.dev/agent': 'agt-01abc', 'berth.dev/session': 'ses-01xyz', 'berth.dev/warm': null },
        annotations: { 'berth.dev/warm-sandbox': 'wsb_01warm' },
        ownerReferences: [{ apiVersion: 'berth.dev/v1alpha1', kind: 'Agent', name: 'agt-01abc', uid: 'u-1', controller: true, blockOwnerDeletion: true }],
      },
      spec: { activeDeadlineSeconds: 301 + 900 },
    });
  });

  it('keeps a deadline already set (Kubernetes only lets it decrease) and leaves out an owner in another namespace', () => {
    const adopted = { ...warmPod, spec: { ...warmPod.spec!, activeDeadlineSeconds: 1_000 } };
    const patch = adoptionPatch(adopted, { ...adoption, owner: undefined }, new Date('2026-11-28T03:00:00Z'));
    expect(patch.spec).toBeUndefined();
    expect(patch.metadata.ownerReferences).toBeUndefined();
  });

  it('counts from the creation when the pod has no start time yet, and holds no secret', () => {
    const created = { ...warmPod, status: {}, metadata: { ...warmPod.metadata, creationTimestamp: new Date('2026-11-28T02:00:00Z') } };
    const patch = adoptionPatch(created, adoption, new Date('2026-11-28T02:00:10Z'));
    expect(patch.spec).toEqual({ activeDeadlineSeconds: 910 });
    expect(JSON.stringify(patch)).not.toMatch(/env/i);
  });
});

describe('podNameOf', () => {
  it.each([
    [{ id: 'agt_01abc', details: { namespace: 'berth', pod: 'wsb-01warm' } }, 'wsb-01warm'],
    [{ id: 'agt_01abc', details: { namespace: 'berth', pod: 'agt-01abc' } }, 'agt-01abc'],
    [{ id: 'agt_01abc' }, 'agt-01abc'],
    [{ id: 'wsb_01warm', details: { agentId: 'agt_01abc' } }, 'wsb-01warm'],
  ])('finds the pod of %j', (ref, pod) => {
    expect(podNameOf(ref)).toBe(pod);
  });
});

describe('podState', () => {
  const running = { name: 'sandbox', state: { running: {} } };
  it.each([
    [{ phase: 'Pending' }, 'pending'],
    [{ phase: 'Running', containerStatuses: [{ name: 'sandbox', state: { waiting: { reason: 'ContainerCreating' } } }] }, 'pending'],
    [{ phase: 'Running', containerStatuses: [running] }, 'running'],
    [{ phase: 'Failed', reason: 'DeadlineExceeded' }, 'expired'],
    [{ phase: 'Failed', reason: 'Evicted' }, 'stopped'],
    [{ phase: 'Succeeded' }, 'stopped'],
  ])('maps %j to %s', (status, state) => {
    expect(podState({ status } as never)).toBe(state);
  });

  it('treats a pod being deleted as stopped', () => {
    expect(podState({ metadata: { deletionTimestamp: new Date() }, status: { phase: 'Running', containerStatuses: [running] } } as never)).toBe(
      'stopped',
    );
  });
});

describe('exitCodeOf', () => {
  it('reads the exit code from the exec status', () => {
    expect(exitCodeOf({ status: 'Success' })).toBe(0);
    expect(
      exitCodeOf({ status: 'Failure', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: '3' }] } }),
    ).toBe(3);
    expect(() => exitCodeOf({ status: 'Failure', message: 'container not found' })).toThrow(/container not found/);
  });
});
