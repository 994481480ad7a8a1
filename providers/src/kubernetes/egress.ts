import { isIP } from 'node:net';
import { CoreV1Api, type KubeConfig, type V1Pod, type V1Secret } from '@kubernetes/client-node';
import { startInformer, type ResilientInformer } from '@berth/common/kubernetes';
import { objectNameToId, type Logger, type SandboxEgress } from '@berth/common';
import type { CertificateAuthority } from '../local/egress/certificates.js';
import { EgressProxy, type EgressProxyOptions, type GatewaySandbox } from '../local/egress/proxy.js';
import { BUNDLE_FILE, CA_FILE, caBundle } from '../local/egress/sandbox.js';
import { EGRESS_GATEWAY, SandboxLabels } from './pod.js';

/**
 * The egress gateway of sandbox pods (ADR 52): the local provider's egress proxy behind one TCP
 * listener, served by every operator replica. A pod of an agent with an egress policy carries the
 * label `berth.dev/egress=gateway`, its proxy variables name the gateway, and the chart's
 * NetworkPolicy lets it reach the gateway alone. A connection is answered for the pod whose IP is
 * its source address, with the policy its Agent has now and the CA in its Secret.
 */

/**
 * The Service a gateway host names, when it names one: `<service>.<namespace>.svc`, with or without
 * the cluster domain after it (as the chart writes it). Its ClusterIP is read from the API server
 * rather than resolved, so the operator needs no cluster DNS either (a pod given it needs none).
 */
export function serviceOfGatewayHost(host: string): { name: string; namespace: string } | undefined {
  const label = '[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?';
  const match = new RegExp(`^(${label})\\.(${label})\\.svc(\\.[A-Za-z0-9.-]+)?\\.?$`).exec(host);
  return match ? { name: match[1]!, namespace: match[3]! } : undefined;
}

/** Keys of the CA Secret: the pod mounts the first two only; the key stays with the gateway. */
const CA_KEY_FILE = 'ca-key.pem';

/** The Secret holding the CA of an agent's pod (named after the pod, which is named after the agent). */
export function egressCaSecretName(podName: string): string {
  return `${podName}-egress-ca`;
}

/** The CA Secret of a pod. Pure but for the bundle of the system's CAs it carries. */
export function egressCaSecret(
  podName: string,
  namespace: string,
  ca: CertificateAuthority,
  owner?: { apiVersion: string; kind: string; name: string; uid: string },
): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: egressCaSecretName(podName),
      namespace,
      labels: { 'app.kubernetes.io/managed-by': 'berth', [SandboxLabels.agent]: podName },
      ...(owner ? { ownerReferences: [{ ...owner, blockOwnerDeletion: true }] } : {}),
    },
    type: 'Opaque',
    stringData: { [CA_FILE]: ca.certificatePem, [BUNDLE_FILE]: caBundle(ca), [CA_KEY_FILE]: ca.keyPem },
  };
}

/** The CA a CA Secret holds, or undefined when it holds none. Pure. */
export function caOfSecret(secret: V1Secret): CertificateAuthority | undefined {
  const certificate = secret.data?.[CA_FILE];
  const key = secret.data?.[CA_KEY_FILE];
  if (!certificate || !key) return undefined;
  return { certificatePem: Buffer.from(certificate, 'base64').toString('utf8'), keyPem: Buffer.from(key, 'base64').toString('utf8') };
}

/**
 * The agent (object name) of the running gateway-bound sandbox pod whose IP is `address`, or
 * undefined. A pod being deleted or not running is nobody: its IP may be handed to another pod
 * before the watch says so, and a stranger must not get its policy. Pure.
 */
export function sandboxOfAddress(pods: Iterable<V1Pod>, address: string): string | undefined {
  const source = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
  if (isIP(source) === 0) return undefined;
  for (const pod of pods) {
    const labels = pod.metadata?.labels ?? {};
    if (labels[SandboxLabels.sandbox] !== 'true' || labels[SandboxLabels.egress] !== EGRESS_GATEWAY) continue;
    if (pod.metadata?.deletionTimestamp || pod.status?.phase !== 'Running') continue;
    const ips = [pod.status.podIP, ...(pod.status.podIPs ?? []).map((entry) => entry.ip)];
    if (ips.includes(source)) return labels[SandboxLabels.agent];
  }
  return undefined;
}

export interface EgressGatewayOptions {
  kubeConfig: KubeConfig;
  /** The sandbox pods' namespace. */
  namespace: string;
  port: number;
  host?: string;
  log: Logger;
  proxy: EgressProxyOptions;
  /** The agent's policy now (its credentials' values resolved), by its object name; undefined when it has none. */
  policyOf: (agentName: string) => Promise<SandboxEgress | undefined>;
  /** How long a policy read is used for, so that a request need not read the database (default 1 s). */
  policyTtlMs?: number;
}

/** The gateway on one operator replica: a watch of the gateway-bound pods, and the proxy's gateway listener. */
export class EgressGateway {
  private readonly proxy: EgressProxy;
  private readonly core: CoreV1Api;
  private pods: ResilientInformer<V1Pod> | undefined;
  private readonly authorities = new Map<string, CertificateAuthority>();
  private readonly policies = new Map<string, { egress: SandboxEgress | undefined; until: number }>();

  constructor(private readonly options: EgressGatewayOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.proxy = new EgressProxy(options.proxy);
  }

  /** Watches the pods, waits for the watch's first list, and listens; resolves to the port. */
  async start(): Promise<number> {
    const selector = `${SandboxLabels.sandbox}=true,${SandboxLabels.egress}=${EGRESS_GATEWAY}`;
    const { namespace } = this.options;
    this.pods = startInformer<V1Pod>(
      this.options.kubeConfig,
      `/api/v1/namespaces/${namespace}/pods`,
      () => this.core.listNamespacedPod({ namespace, labelSelector: selector }),
      {
        // The cache is what the gateway reads; a pod gone takes what was kept for its agent along.
        onChange: (pod, type) => {
          const agentName = pod.metadata?.labels?.[SandboxLabels.agent];
          if (type !== 'DELETED' || !agentName) return;
          this.authorities.delete(agentName);
          this.policies.delete(agentName);
        },
      },
      { labelSelector: selector, log: this.options.log, what: 'egress gateway pods' },
    );
    await this.pods.synced;
    return this.proxy.listenGateway({ port: this.options.port, ...(this.options.host ? { host: this.options.host } : {}), identify: (address) => this.identify(address) });
  }

  async stop(): Promise<void> {
    await this.pods?.stop();
    await this.proxy.closeAll();
  }

  private async identify(address: string): Promise<GatewaySandbox | undefined> {
    const agentName = sandboxOfAddress(this.pods?.cache.list(this.options.namespace) ?? [], address);
    if (!agentName) return undefined;
    const [egress, ca] = await Promise.all([this.policyOf(agentName), this.caOf(agentName)]);
    if (!egress || !ca) return undefined;
    return { agentId: objectNameToId(agentName), egress, ca };
  }

  private async policyOf(agentName: string): Promise<SandboxEgress | undefined> {
    const now = Date.now();
    const kept = this.policies.get(agentName);
    if (kept && kept.until > now) return kept.egress;
    const egress = await this.options.policyOf(agentName);
    this.policies.set(agentName, { egress, until: now + (this.options.policyTtlMs ?? 1_000) });
    for (const [name, entry] of this.policies) if (entry.until <= now) this.policies.delete(name);
    return egress;
  }

  /** The pod's CA from its Secret, read once (it never changes: a new agent is a new pod and Secret). */
  private async caOf(agentName: string): Promise<CertificateAuthority | undefined> {
    const kept = this.authorities.get(agentName);
    if (kept) return kept;
    let secret: V1Secret;
    try {
      secret = await this.core.readNamespacedSecret({ name: egressCaSecretName(agentName), namespace: this.options.namespace });
    } catch (error) {
      this.options.log.warn({ agent: agentName, err: error }, 'the egress CA of a sandbox pod could not be read; refusing its connection');
      return undefined;
    }
    const ca = caOfSecret(secret);
    if (!ca) return undefined;
    // One CA per sandbox that used this replica; the oldest go first past the cap.
    if (this.authorities.size >= 4096) this.authorities.delete(this.authorities.keys().next().value!);
    this.authorities.set(agentName, ca);
    return ca;
  }
}
