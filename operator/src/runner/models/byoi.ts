import { SecretKeyError, getProviderConfig, privateHostProblem, resolveSecrets, type ModelProviders, type Queryable, type SecretBox } from '@berth/common';
import { ModelError, type ModelEndpoint } from './types.js';

/**
 * BYOI models: the `organizationEndpoint` of a `ModelRouter`. An organization that configured a
 * model vendor (`PUT /v1/providers/<vendor>`, live keys) and left it enabled calls that vendor
 * with its own API key, the organization secret the configuration names, at its own `baseUrl`
 * or else the install's. Read on every run, so a change applies from the next run on.
 *
 * A configuration whose secret is gone (or does not decrypt) fails the run with a ModelError
 * naming the secret: falling back to the platform key would bill the platform for calls the
 * organization meant to pay for itself.
 */
export function byoiModelEndpoints(
  db: Queryable,
  box: SecretBox,
  modelProviders: ModelProviders,
  allowPrivate = false,
): (organizationId: string, vendor: string) => Promise<ModelEndpoint | undefined> {
  return async (organizationId, vendor) => {
    const installed = modelProviders[vendor];
    if (!installed) return undefined;
    const own = await getProviderConfig(db, organizationId, 'live', vendor);
    if (!own?.enabled) return undefined;
    const where = `the organization's ${vendor} provider configuration names the organization secret ${own.credentialRef} as its API key`;
    let values: Record<string, string>;
    try {
      values = await resolveSecrets(db, box, { organizationId, mode: 'live', sessionId: '' }, [own.credentialRef]);
    } catch (error) {
      if (error instanceof SecretKeyError) throw new ModelError(`${where}, which cannot be read: ${error.message}`, 0, false);
      throw error;
    }
    const apiKey = values[own.credentialRef];
    if (apiKey === undefined) {
      throw new ModelError(
        `${where}, and there is no such secret: store it again (POST /v1/secrets) or remove the configuration (DELETE /v1/providers/${vendor}) to use the platform's key`,
        0,
        false,
      );
    }
    const baseUrl = typeof own.config?.baseUrl === 'string' ? own.config.baseUrl : installed.baseUrl;
    if (typeof own.config?.baseUrl === 'string') {
      // Checked again here, after DNS resolution: a name may point inside the network by now.
      const inside = await privateHostProblem(baseUrl, allowPrivate);
      if (inside) throw new ModelError(`the organization's ${vendor} baseUrl is refused: ${inside}`, 0, false);
    }
    return { api: installed.api, baseUrl, apiKey };
  };
}
