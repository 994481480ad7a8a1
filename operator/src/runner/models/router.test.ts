import { describe, expect, it } from 'vitest';
import { ModelError } from './types.js';
import { MissingModelKeyError, ModelRouter } from './router.js';

const config = {
  modelProviders: {
    openai: { api: 'openai' as const, baseUrl: 'https://api.openai.com/v1', apiKeyEnv: 'OPENAI_API_KEY' },
    vllm: { api: 'openai' as const, baseUrl: 'http://vllm.internal/v1' },
  },
  modelPrices: {},
};

describe('ModelRouter keys', () => {
  const byoi = async (organizationId: string, vendor: string) => {
    if (organizationId === 'org_own' && vendor === 'openai') return { api: 'openai' as const, baseUrl: 'https://own.example/v1', apiKey: 'sk-own' };
    if (organizationId === 'org_broken') throw new ModelError('the secret OWN_KEY is gone', 0, false);
    return undefined;
  };

  it.each([
    ['the platform key is set', { OPENAI_API_KEY: 'sk-platform' }, 'org_a', 'openai/gpt-4o', undefined],
    ['no platform key and no key of the organization', {}, 'org_a', 'openai/gpt-4o', 'OPENAI_API_KEY is not set'],
    ['an empty platform key', { OPENAI_API_KEY: '' }, 'org_a', 'openai/gpt-4o', 'PUT /v1/providers/openai'],
    ['no platform key, but the organization brings one', {}, 'org_own', 'openai/gpt-4o', undefined],
    ['a vendor that needs no key', {}, 'org_a', 'vllm/llama', undefined],
    ['an unknown vendor', {}, 'org_a', 'mistral/large', 'no model provider "mistral"'],
    ['a broken BYOI configuration (left to the run, which names the secret)', {}, 'org_broken', 'openai/gpt-4o', undefined],
  ])('%s', async (_case, env, organizationId, model, problem) => {
    const reason = await new ModelRouter(config, env, byoi).unusableReason(organizationId, model);
    if (problem === undefined) expect(reason).toBeUndefined();
    else expect(reason).toContain(problem);
  });

  it('refuses to resolve a keyless route, without retrying: the runner fails the run at once', async () => {
    const error = await new ModelRouter(config, {}, byoi).resolve('org_a', 'openai/gpt-4o').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(MissingModelKeyError);
    expect((error as ModelError).retryable).toBe(false);
  });
});
