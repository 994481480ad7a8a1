import type { BerthConfig } from '@berth/common';
import { dollarsPerMillionToNanocents, type BillingMode } from '@berth/common';
import { anthropicAdapter } from './anthropic.js';
import { openAiAdapter } from './openai.js';
import { ModelError, type ModelAdapter, type ModelEndpoint, type ModelRequest, type ModelResponse } from './types.js';

/** A model resolved for one organization: how to call it and how it is billed. */
export interface ModelRoute {
  vendor: string;
  model: string;
  adapter: ModelAdapter;
  endpoint: ModelEndpoint;
  /** `byoi` when the organization's own key pays the vendor (BYOI models); `platform` otherwise. */
  keySource: 'platform' | 'byoi';
  price: { inputNanocentsPerToken: bigint; outputNanocentsPerToken: bigint };
}

export class UnknownModelError extends Error {
  override name = 'UnknownModelError';
}

/** The vendor needs a key and neither the install nor the organization has one. */
export class MissingModelKeyError extends ModelError {
  override name = 'MissingModelKeyError';
  constructor(message: string) {
    super(message, 0, false);
  }
}

const ADAPTERS: Record<ModelEndpoint['api'], ModelAdapter> = { openai: openAiAdapter, anthropic: anthropicAdapter };

/**
 * Finds where a `<vendor>/<model>` is served and what it costs. Platform keys come from the
 * environment variable the provider table names. Per-organization keys (BYOI models) plug in
 * through `organizationEndpoint`, which takes precedence when it answers.
 */
export class ModelRouter {
  constructor(
    private readonly config: Pick<BerthConfig, 'modelProviders' | 'modelPrices'>,
    private readonly env: NodeJS.ProcessEnv = process.env,
    private readonly organizationEndpoint?: (organizationId: string, vendor: string) => Promise<ModelEndpoint | undefined>,
  ) {}

  vendors(): string[] {
    return Object.keys(this.config.modelProviders);
  }

  /** Why a model cannot be used, or undefined when it can (checked at agent creation). */
  problem(model: string): string | undefined {
    const vendor = model.split('/')[0]!;
    if (!this.config.modelProviders[vendor]) {
      return `no model provider "${vendor}" is configured; this install has ${this.vendors().join(', ')}`;
    }
    return undefined;
  }

  /**
   * Why the organization cannot call `model` at all now, or undefined: an unknown vendor, or a
   * vendor whose platform key (`apiKeyEnv`) is not set and for which the organization has no
   * key of its own (a BYOI model configuration). Checked before a run is queued, so that it is
   * refused at once rather than retried. A BYOI configuration that cannot be used (its secret
   * is gone) is left to the run, which fails naming the secret.
   */
  async unusableReason(organizationId: string, model: string): Promise<string | undefined> {
    try {
      await this.resolve(organizationId, model);
      return undefined;
    } catch (error) {
      if (error instanceof UnknownModelError || error instanceof MissingModelKeyError) return error.message;
      if (error instanceof ModelError) return undefined;
      throw error;
    }
  }

  async resolve(organizationId: string, model: string): Promise<ModelRoute> {
    const slash = model.indexOf('/');
    const vendor = model.slice(0, slash);
    const name = model.slice(slash + 1);
    const configured = this.config.modelProviders[vendor];
    if (!configured) throw new UnknownModelError(this.problem(model));
    const own = await this.organizationEndpoint?.(organizationId, vendor);
    const platformKey = configured.apiKeyEnv ? this.env[configured.apiKeyEnv] : undefined;
    if (!own && configured.apiKeyEnv && !platformKey) {
      // Calling without the key would only be refused (or retried while the vendor is unreachable).
      throw new MissingModelKeyError(
        `no API key for model vendor "${vendor}": this install has none (${configured.apiKeyEnv} is not set) and the organization has configured none (PUT /v1/providers/${vendor})`,
      );
    }
    const endpoint: ModelEndpoint = own ?? { api: configured.api, baseUrl: configured.baseUrl, apiKey: platformKey };
    const price = this.config.modelPrices[model];
    return {
      vendor,
      model: name,
      adapter: ADAPTERS[endpoint.api],
      endpoint,
      keySource: own ? 'byoi' : 'platform',
      price: {
        inputNanocentsPerToken: price ? dollarsPerMillionToNanocents(price.input) : 0n,
        outputNanocentsPerToken: price ? dollarsPerMillionToNanocents(price.output) : 0n,
      },
    };
  }
}

export function modelCostNanocents(route: ModelRoute, usage: ModelResponse['usage']): bigint {
  return BigInt(usage.inputTokens) * route.price.inputNanocentsPerToken + BigInt(usage.outputTokens) * route.price.outputNanocentsPerToken;
}

export function billingModeOf(route: ModelRoute, computeSource: 'platform' | 'byoi' = 'platform'): BillingMode {
  if (route.keySource === 'byoi') return computeSource === 'byoi' ? 'byoi_both' : 'byoi_models';
  return computeSource === 'byoi' ? 'byoi_compute' : 'managed';
}

export interface CallOptions {
  timeoutMs: number;
  maxRetries?: number;
  signal?: AbortSignal;
  onRetry?: (error: ModelError, attempt: number, delayMs: number) => void;
  sleep?: (ms: number) => Promise<void>;
}

const BASE_RETRY_MS = 500;
const MAX_RETRY_MS = 20_000;

/**
 * One model call with a time limit, retried with exponential backoff (or the upstream's
 * Retry-After) on 429, 5xx and network failures. Other errors go straight to the caller.
 */
export async function callModel(route: ModelRoute, request: ModelRequest, options: CallOptions): Promise<ModelResponse> {
  const maxRetries = options.maxRetries ?? 3;
  const sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  for (let attempt = 0; ; attempt++) {
    const timeout = AbortSignal.timeout(options.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    try {
      return await route.adapter.complete(route.endpoint, { ...request, signal });
    } catch (error) {
      if (options.signal?.aborted) throw error;
      const failure =
        error instanceof ModelError
          ? error
          : timeout.aborted
            ? new ModelError(`the model did not answer within ${options.timeoutMs / 1000}s`, 0, true)
            : undefined;
      if (!failure) throw error;
      if (!failure.retryable || attempt >= maxRetries) throw failure;
      const backoff = Math.min(BASE_RETRY_MS * 2 ** attempt, MAX_RETRY_MS);
      const delayMs = Math.min(failure.retryAfterMs ?? backoff + Math.floor(Math.random() * backoff * 0.2), MAX_RETRY_MS);
      options.onRetry?.(failure, attempt + 1, delayMs);
      await sleep(delayMs);
    }
  }
}
