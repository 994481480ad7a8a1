import { ApiError, deleteProviderConfig, listProviderConfigs, missingSecrets, putProviderConfig, webhookUrlProblem, type Clock, type Pool, type UrlPolicy } from '@berth/common';
import type { ModelRouter } from '@berth/operator';
import { z } from 'zod';
import type { Principal } from '../http/context.js';
import { validationError } from '../http/errors.js';

export const PROVIDER_NAME_PATTERN = /^[a-z0-9-]{1,64}$/;
export const PROVIDER_NAME_RULE = 'lowercase letters, digits and -, 1 to 64 characters';

/**
 * Why `text` is not a URL this install lets an organization point it at, or undefined: https
 * (http where allowed), no credentials, and no private, loopback or link-local address unless
 * the install allows them (BERTH_BYOI_ALLOW_*): otherwise any organization could make Berth
 * send requests into the install's own network.
 */
function httpUrlProblem(text: string, policy: UrlPolicy): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute http or https URL';
  }
  if (url.username || url.password) return 'must not carry credentials: they belong in the secret credentialRef names';
  return webhookUrlProblem(text, policy);
}

const httpUrl = (what: string, policy: UrlPolicy) =>
  z
    .string({ error: (issue) => (issue.input === undefined ? `required: ${what}` : 'must be a string') })
    .max(2048)
    .superRefine((text, ctx) => {
      const problem = httpUrlProblem(text, policy);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    });

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * What `config` must look like for a provider, where Berth reads it: a model vendor of this install
 * takes an optional `baseUrl` (and nothing else, so a misspelt key is refused rather than ignored);
 * `kubernetes` (the organization's own cluster, its kubeconfig the credential) an optional
 * namespace. Any other provider, `remote` or a name of the organization's choosing or one of this
 * install's own (`local`), is compute that Berth reaches over the remote provider protocol, so it
 * requires `endpoint`: without one, every agent the configuration applies to could never start.
 */
function configSchema(provider: string, modelVendors: string[], policy: UrlPolicy): z.ZodType<Record<string, unknown> | null> {
  if (provider === 'kubernetes') {
    return z
      .object({ namespace: z.string().regex(DNS_LABEL, 'must be a DNS label: lowercase letters, digits and -, at most 63 characters').optional() })
      .loose()
      .nullable();
  }
  if (modelVendors.includes(provider)) {
    return z.object({ baseUrl: httpUrl('a URL', policy).optional() }).strict().nullable();
  }
  const what = `the http(s) URL of the provider, which speaks the remote provider protocol (${provider} is not kubernetes or a model vendor of this install: ${modelVendors.join(', ')})`;
  return z.object({ endpoint: httpUrl(what, policy) }, { error: `required: an object with endpoint, ${what}` }).loose();
}

export interface ProviderConfigInput {
  credentialRef: string;
  config?: Record<string, unknown> | null | undefined;
  enabled: boolean;
}

/**
 * BYOI provider configurations of an organization (per key mode). A provider listed runs on the
 * organization's own infrastructure or account, with the credential in the organization secret
 * the configuration names; one not listed runs managed. Configurations never hold a credential
 * themselves, so none can leak from here.
 */
export function createProviderService(deps: { pool: Pool; clock: Clock; models: Pick<ModelRouter, 'vendors'>; policy: UrlPolicy }) {
  const { pool, clock, models } = deps;

  return {
    async list(principal: Principal) {
      return { data: await listProviderConfigs(pool, principal.organizationId, principal.mode) };
    },

    async put(principal: Principal, provider: string, input: ProviderConfigInput) {
      const parsed = configSchema(provider, models.vendors(), deps.policy).safeParse(input.config ?? null);
      if (!parsed.success) {
        for (const issue of parsed.error.issues) issue.path.unshift('config');
        throw validationError(parsed.error, 'body');
      }
      const where = { organizationId: principal.organizationId, mode: principal.mode };
      const [missing] = await missingSecrets(pool, { ...where, sessionId: '' }, [input.credentialRef]);
      if (missing !== undefined) {
        const message = `no organization secret named ${missing}; store the credential first (POST /v1/secrets)`;
        throw new ApiError('unprocessable_entity', `credentialRef: ${message}`, { fields: { credentialRef: [message] } });
      }
      await putProviderConfig(pool, where, { provider, credentialRef: input.credentialRef, config: parsed.data, enabled: input.enabled }, clock.now());
      return { ok: true as const, provider, mode: 'byoi' as const };
    },

    async delete(principal: Principal, provider: string) {
      if (!(await deleteProviderConfig(pool, { organizationId: principal.organizationId, mode: principal.mode }, provider))) {
        throw new ApiError('not_found', `provider ${provider} is not configured; it already runs managed`, { provider });
      }
      return { ok: true as const, provider, mode: 'managed' as const };
    },
  };
}

export type ProviderService = ReturnType<typeof createProviderService>;
