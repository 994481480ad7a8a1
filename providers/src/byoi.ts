import {
  ProviderError,
  getProviderConfig,
  resolveSecrets,
  type BerthConfig,
  type Logger,
  type Pool,
  type SecretBox,
  type SandboxProvider,
} from '@berth/common';
import type { ByoiRef, Mode } from '@berth/crds';
import type { ByoiSource } from './registry.js';
import { RemoteProvider } from './remote/client.js';

/**
 * Why Berth cannot run sandboxes on the organization's configuration of provider `name`, or
 * undefined when it can: compute is the remote provider protocol (`config.endpoint`) or, for
 * `kubernetes`, the organization's own cluster. The configuration API refuses any other; one
 * stored before it did is refused when an agent names it, rather than left to fail for good.
 */
export function byoiComputeProblem(name: string, ref: ByoiRef): string | undefined {
  if (typeof ref.config?.endpoint === 'string' || name === 'kubernetes') return undefined;
  return `provider ${name} is configured as BYOI but Berth cannot run sandboxes on it: give it config.endpoint (the remote provider protocol) with PUT /v1/providers/${name}, or return it to managed with DELETE /v1/providers/${name}`;
}

/**
 * BYOI compute from the organization's provider configurations: a configuration with
 * `config.endpoint` is remote provider protocol compute (the credential is its bearer token);
 * `kubernetes` is the organization's own cluster (the credential is a kubeconfig, sandboxes go
 * to `config.namespace`, default `default`).
 */
export function byoiSource(deps: { pool: Pool; box: SecretBox; config: BerthConfig; log: Logger }): ByoiSource {
  return {
    config: (organizationId, mode, provider) => getProviderConfig(deps.pool, organizationId, mode, provider),
    async build(organizationId: string, mode: Mode, name: string, ref: ByoiRef): Promise<SandboxProvider> {
      const values = await resolveSecrets(deps.pool, deps.box, { organizationId, mode, sessionId: '' }, [ref.credentialRef]);
      const credential = values[ref.credentialRef];
      if (credential === undefined) {
        throw new ProviderError(name, `the secret ${ref.credentialRef} that holds the credential of provider ${name} no longer exists`);
      }
      const endpoint = ref.config?.endpoint;
      if (typeof endpoint === 'string') return RemoteProvider.connect(name, endpoint, credential, deps.config.byoiAllowPrivate);
      if (name === 'kubernetes') {
        const { KubeConfig } = await import('@kubernetes/client-node');
        const { createKubernetesProvider } = await import('./kubernetes/index.js');
        const kubeConfig = new KubeConfig();
        try {
          kubeConfig.loadFromString(credential);
        } catch (error) {
          throw new ProviderError(name, `the secret ${ref.credentialRef} is not a kubeconfig: ${(error as Error).message}`);
        }
        const namespace = typeof ref.config?.namespace === 'string' ? ref.config.namespace : 'default';
        // The agents are not resources of that cluster: no owner references to them (its garbage
        // collector would delete pods whose owner it cannot find), so no resource namespace.
        return createKubernetesProvider({ ...deps.config, namespace: '', sandboxNamespace: namespace }, kubeConfig, deps.log.child({ organizationId, byoi: name }));
      }
      throw new ProviderError(name, byoiComputeProblem(name, ref)!);
    },
  };
}
