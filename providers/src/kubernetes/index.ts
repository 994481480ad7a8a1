import type { BerthConfig, Logger } from '@berth/common';
import type { KubeConfig } from '@kubernetes/client-node';
import { KubernetesProvider } from './provider.js';

export { KubernetesProvider, podState } from './provider.js';
export { desiredPod, EGRESS_GATEWAY, SandboxLabels, SANDBOX_CONTAINER, SANDBOX_UID, type PodRequest, type PodSettings } from './pod.js';
export { execInPod, exitCodeOf } from './exec.js';
export { EgressGateway, caOfSecret, egressCaSecret, egressCaSecretName, sandboxOfAddress, type EgressGatewayOptions } from './egress.js';
export { NodeAgentClient, NodeAgentRefusal, readArchiveManifest, type NodeAgentInfo, type NodeAgentSettings } from './node-agent.js';

/** The kubernetes provider as cluster mode configures it. */
export function createKubernetesProvider(config: BerthConfig, kubeConfig: KubeConfig, log: Logger): KubernetesProvider {
  return new KubernetesProvider({
    kubeConfig,
    log: log.child({ provider: 'kubernetes' }),
    resourceNamespace: config.namespace,
    pods: {
      namespace: config.sandboxNamespace ?? config.namespace,
      runtimeClassName: config.runtimeClass,
      images: { python: config.imagePython, node: config.imageNode, go: config.imageGo },
      browserImage: config.browserImage,
      gpuTable: config.gpuTable,
      cpuRequest: config.sandboxCpuRequest,
      cpuLimit: config.sandboxCpus,
      memoryRequestBytes: config.sandboxMemoryRequest,
      memoryLimitBytes: config.sandboxMemory,
      workspaceSizeBytes: config.workspaceSize,
    },
    nodeAgents: config.nodeAgentPort !== undefined ? { port: config.nodeAgentPort, token: config.nodeAgentToken } : undefined,
    egressGateway: config.egressGateway,
  });
}
