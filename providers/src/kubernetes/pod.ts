import type { V1OwnerReference, V1Pod, V1Toleration } from '@kubernetes/client-node';
import type { Compute, SandboxRef } from '@berth/crds';
import { idToObjectName } from '@berth/common';
import type { GpuTable } from '@berth/common';
import { GUEST_MOUNT } from '../local/launcher.js';
import { BUNDLE_FILE, CA_FILE, EGRESS_MOUNT, egressEnv } from '../local/egress/sandbox.js';
import { POD_CHANNEL_DIR, launcherCommand } from './launcher.js';

export const SANDBOX_CONTAINER = 'sandbox';

/** Labels every sandbox pod carries; the NetworkPolicy and the operator's pod watch select on them. */
export const SandboxLabels = {
  sandbox: 'berth.dev/sandbox',
  agent: 'berth.dev/agent',
  session: 'berth.dev/session',
  /** `gateway` on the pod of an agent with an egress policy: its only way out is the egress gateway (ADR 52). */
  egress: 'berth.dev/egress',
  /** A warm pool's pod that no agent has claimed yet (ADR 53): it has no agent and session labels. */
  warm: 'berth.dev/warm',
} as const;

/** The value of SandboxLabels.egress on a pod whose only way out is the egress gateway. */
export const EGRESS_GATEWAY = 'gateway';

/** On a pod an agent adopted from a warm pool: the warm sandbox's id (`wsb_…`) it was started as. */
export const WARM_SANDBOX_ANNOTATION = 'berth.dev/warm-sandbox';

export interface PodSettings {
  namespace: string;
  runtimeClassName?: string | undefined;
  images: Record<Compute, string>;
  browserImage?: string | undefined;
  gpuTable: GpuTable;
  cpuRequest: number;
  cpuLimit: number;
  memoryRequestBytes: number;
  memoryLimitBytes: number;
  workspaceSizeBytes: number;
}

export interface PodRequest {
  /** Object name of the Agent (`agt-…`), or of the warm sandbox (`wsb-…`); the pod has the same name. */
  name: string;
  /**
   * A warm pool's pod (ADR 53): labelled as a sandbox and warm, with no agent, session, deadline
   * or secrets until an agent claims it (adoptionPatch).
   */
  warm?: true | undefined;
  sessionName?: string | undefined;
  compute: Compute;
  browser: boolean;
  gpu?: string | undefined;
  /** The kubelet's backstop (activeDeadlineSeconds); a warm pod gets it at its claim. */
  timeoutSeconds?: number | undefined;
  /** A Secret (in the pod's namespace) whose keys become the sandbox's environment: the agent's secrets, never in the pod spec. */
  envSecret?: string | undefined;
  /**
   * A native restore: the pod is pinned to `node` and held by a scheduling gate until the node
   * agent there has staged the checkpoint for the pod's UID (known only once the pod exists).
   */
  nativeRestore?: { node: string; key: string } | undefined;
  /**
   * The ConfigMap with the guest programs (launcher.ts): the pod's main process is then the
   * launcher (ADR 47). Without it the image's own command runs, as before the launcher.
   */
  guestConfigMap?: string | undefined;
  /**
   * The egress gateway of an agent with an egress policy (ADR 52): the proxy variables name it
   * (`http://<address>:<port>`), and the pod mounts its CA's certificate (not its key) from
   * `caSecret`. Absent: the pod's network is the install's sandbox NetworkPolicy.
   */
  egress?: { proxyUrl: string; caSecret: string } | undefined;
  /** The Agent custom resource, when it lives in the pod's namespace: deleting it deletes the pod. */
  owner?: { apiVersion: string; kind: string; name: string; uid: string } | undefined;
}

/** Holds a pod for a native restore until its checkpoint is staged on its node. */
export const NATIVE_RESTORE_GATE = 'berth.dev/native-restore';
/** On a pod made for a native restore: the snapshot's archive key, its node, and `native` or `filesystem` once released. */
export const RestoreAnnotations = {
  key: 'berth.dev/restore-key',
  node: 'berth.dev/restore-node',
  level: 'berth.dev/restore-level',
} as const;

/** Sandboxes run as this user (`sandbox` in the images, home /home/sandbox, owner of /workspace). */
export const SANDBOX_UID = 1000;

const millicores = (cores: number) => `${Math.round(cores * 1000)}m`;
const mebibytes = (bytes: number) => `${Math.ceil(bytes / 1024 ** 2)}Mi`;

/**
 * The pod of one agent. Pure: the same agent and settings always give the same pod, so a
 * reconcile can compare, and table-driven tests can pin every field.
 */
export function desiredPod(request: PodRequest, settings: PodSettings): V1Pod {
  const gpu = request.gpu === undefined ? undefined : settings.gpuTable[request.gpu];
  if (request.gpu !== undefined && !gpu) {
    throw new Error(`gpu "${request.gpu}" is not in the GPU table (${Object.keys(settings.gpuTable).join(', ')})`);
  }
  const image = request.browser ? settings.browserImage : settings.images[request.compute];
  if (!image) throw new Error('browser agents need a browser image, and none is configured');
  const limits: Record<string, string> = { cpu: millicores(settings.cpuLimit), memory: mebibytes(settings.memoryLimitBytes) };
  const requests: Record<string, string> = { cpu: millicores(settings.cpuRequest), memory: mebibytes(settings.memoryRequestBytes) };
  if (gpu) {
    limits[gpu.resource] = String(gpu.count);
    requests[gpu.resource] = String(gpu.count);
  }
  const tolerations: V1Toleration[] = gpu?.tolerations.map((toleration) => ({ ...toleration })) ?? [];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: request.name,
      namespace: settings.namespace,
      labels: {
        'app.kubernetes.io/name': 'berth-sandbox',
        'app.kubernetes.io/managed-by': 'berth',
        [SandboxLabels.sandbox]: 'true',
        ...(request.warm ? { [SandboxLabels.warm]: 'true' } : { [SandboxLabels.agent]: request.name, [SandboxLabels.session]: request.sessionName ?? '' }),
        ...(request.egress ? { [SandboxLabels.egress]: EGRESS_GATEWAY } : {}),
      },
      ...(request.nativeRestore
        ? { annotations: { [RestoreAnnotations.key]: request.nativeRestore.key, [RestoreAnnotations.node]: request.nativeRestore.node } }
        : {}),
      ...(request.owner
        ? { ownerReferences: [{ ...request.owner, controller: true, blockOwnerDeletion: true }] }
        : {}),
    },
    spec: {
      ...(settings.runtimeClassName ? { runtimeClassName: settings.runtimeClassName } : {}),
      restartPolicy: 'Never',
      // A backstop: the operator ends the agent at its timeout, the kubelet at the latest then.
      ...(request.timeoutSeconds !== undefined ? { activeDeadlineSeconds: request.timeoutSeconds } : {}),
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 5,
      ...(gpu && Object.keys(gpu.nodeSelector).length > 0 ? { nodeSelector: { ...gpu.nodeSelector } } : {}),
      ...(request.nativeRestore
        ? {
            schedulingGates: [{ name: NATIVE_RESTORE_GATE }],
            affinity: {
              nodeAffinity: {
                requiredDuringSchedulingIgnoredDuringExecution: {
                  nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [request.nativeRestore.node] }] }],
                },
              },
            },
          }
        : {}),
      ...(tolerations.length > 0 ? { tolerations } : {}),
      securityContext: {
        runAsNonRoot: true,
        runAsUser: SANDBOX_UID,
        runAsGroup: SANDBOX_UID,
        fsGroup: SANDBOX_UID,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: SANDBOX_CONTAINER,
          image,
          imagePullPolicy: 'IfNotPresent',
          workingDir: '/workspace',
          ...(request.guestConfigMap ? { command: launcherCommand() } : {}),
          ...(request.envSecret ? { envFrom: [{ secretRef: { name: request.envSecret } }] } : {}),
          // env wins over envFrom: the agent's secrets cannot name another proxy.
          ...(request.egress ? { env: Object.entries(egressEnv(request.egress.proxyUrl)).map(([name, value]) => ({ name, value })) } : {}),
          resources: { requests, limits },
          securityContext: {
            allowPrivilegeEscalation: false,
            privileged: false,
            capabilities: { drop: ['ALL'] },
          },
          volumeMounts: [
            { name: 'workspace', mountPath: '/workspace' },
            ...(request.guestConfigMap
              ? [
                  { name: 'guest', mountPath: GUEST_MOUNT, readOnly: true },
                  { name: 'channel', mountPath: POD_CHANNEL_DIR },
                ]
              : []),
            ...(request.egress ? [{ name: 'egress-ca', mountPath: EGRESS_MOUNT, readOnly: true }] : []),
          ],
        },
      ],
      volumes: [
        { name: 'workspace', emptyDir: { sizeLimit: mebibytes(settings.workspaceSizeBytes) } },
        ...(request.guestConfigMap
          ? [
              { name: 'guest', configMap: { name: request.guestConfigMap, defaultMode: 0o444 } },
              { name: 'channel', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
            ]
          : []),
        ...(request.egress
          ? [{ name: 'egress-ca', secret: { secretName: request.egress.caSecret, defaultMode: 0o444, items: EGRESS_CA_ITEMS.map((item) => ({ ...item })) } }]
          : []),
      ],
    },
  };
}

/** The items of an egress CA Secret a pod mounts: the certificate and the bundle with it, never the key. */
export const EGRESS_CA_ITEMS = [
  { key: CA_FILE, path: CA_FILE },
  { key: BUNDLE_FILE, path: BUNDLE_FILE },
] as const;

/** A warm pool's pod (ADR 53): an agent's pod without the agent, its secrets or its deadline. */
export function desiredWarmPod(request: Pick<PodRequest, 'name' | 'compute' | 'browser' | 'guestConfigMap'>, settings: PodSettings): V1Pod {
  return desiredPod({ ...request, warm: true }, settings);
}

/** What an agent that claims a warm pod needs of it (ADR 53). */
export interface PodAdoption {
  /** Object names of the Agent and its Session. */
  agentName: string;
  sessionName: string;
  /** The warm sandbox's id (`wsb_…`). */
  warmId: string;
  timeoutSeconds: number;
  /** The Agent custom resource, when it lives in the pod's namespace. */
  owner?: { apiVersion: string; kind: string; name: string; uid: string } | undefined;
}

/** A JSON merge patch of a pod: a null label is removed. */
export interface AdoptionPatch {
  metadata: { labels: Record<string, string | null>; annotations: Record<string, string>; ownerReferences?: V1OwnerReference[] };
  spec?: { activeDeadlineSeconds: number };
}

/**
 * The merge patch by which an agent adopts a warm pod: the agent's labels (the provider's watch
 * maps the pod to the agent from then on) instead of the warm one, its owner reference (deleting
 * the Agent, or its Session, deletes the pod), and the kubelet's deadline, counted from the pod's
 * start as Kubernetes counts it. Pure, and the same when applied twice: a deadline already set is
 * kept (Kubernetes lets it decrease only), and labels and owner are the agent's already.
 */
export function adoptionPatch(pod: V1Pod, adoption: PodAdoption, now: Date): AdoptionPatch {
  const startedAt = pod.status?.startTime ?? pod.metadata?.creationTimestamp;
  const runningSeconds = startedAt ? Math.max(0, Math.ceil((now.getTime() - new Date(startedAt).getTime()) / 1000)) : 0;
  return {
    metadata: {
      labels: { [SandboxLabels.agent]: adoption.agentName, [SandboxLabels.session]: adoption.sessionName, [SandboxLabels.warm]: null },
      annotations: { [WARM_SANDBOX_ANNOTATION]: adoption.warmId },
      ...(adoption.owner ? { ownerReferences: [{ ...adoption.owner, controller: true, blockOwnerDeletion: true }] } : {}),
    },
    ...(pod.spec?.activeDeadlineSeconds === undefined ? { spec: { activeDeadlineSeconds: runningSeconds + adoption.timeoutSeconds } } : {}),
  };
}

/**
 * The pod of a sandbox: the one its ref names (an adopted warm pod keeps its `wsb-…` name, ADR 53),
 * else the one named after its id (an agent's own pod, or a warm sandbox's before its claim).
 */
export function podNameOf(ref: Pick<SandboxRef, 'id' | 'details'>): string {
  const pod = ref.details?.['pod'];
  return typeof pod === 'string' && pod.length > 0 ? pod : idToObjectName(ref.id);
}
