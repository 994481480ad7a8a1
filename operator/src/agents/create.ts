import {
  ApiError,
  Labels,
  MAX_TIMEOUT_SECONDS,
  assertInstallCurrency,
  assertSecretsExist,
  extractionRulesProblem,
  metadataLabels,
  missingSecrets,
  resolveAgentKnowledge,
  resolveAgentMcp,
  idToObjectName,
  newId,
  objectNameToId,
  toolListProblem,
  unsupportedReason,
  type Clock,
  type LimitGuard,
  type Pool,
  type Principal,
  type Resource,
  type ResourceStore,
} from '@berth/common';
import { SANDBOX_FINALIZER, formatDuration, parseDuration, type AgentSpec, type Egress, type ByoiRef, type Compute, type Cost, type ModelSettings, type Lifecycle } from '@berth/crds';
import { byoiComputeProblem, type ProviderRegistry } from '@berth/providers';
import type { ModelRouter } from '../runner/models/router.js';

export interface CreateAgentInput {
  modelSettings?: ModelSettings | undefined;
  compute: Compute;
  browser: boolean;
  storage?: string | undefined;
  gpu?: string | undefined;
  model?: string | undefined;
  instructions?: string | undefined;
  tools: string[];
  timeout: string;
  costCap?: Cost | undefined;
  provider?: string | undefined;
  providerFallback?: string | undefined;
  region?: string | undefined;
  approvals?: Record<string, unknown> | undefined;
  knowledge?: boolean | string | undefined;
  metadata?: Record<string, unknown> | undefined;
  guardrails?: Record<string, unknown> | undefined;
  /** The definition id the fields came from (resolved from a name or id), and its version. */
  definition?: string | undefined;
  definitionVersion?: number | undefined;
  overrides?: Record<string, unknown> | undefined;
  secrets?: string[] | undefined;
  mcp?: string[] | '*' | undefined;
  lifecycle?: Lifecycle | undefined;
  egress?: Egress | undefined;
}

export interface AgentFactoryDeps {
  store: ResourceStore;
  pool: Pool;
  providers: ProviderRegistry;
  limits: LimitGuard;
  models: Pick<ModelRouter, 'problem'>;
  clock: Clock;
  defaultModel: string;
  /** The egress allow-list of agents created without one, on providers that enforce egress (BERTH_EGRESS_ALLOW). */
  defaultEgress?: { hosts: string[]; cidrs: string[] };
  currency: string;
}

/**
 * Writes Agent resources: the checks every new agent passes (providers, tools, model, secrets,
 * the session's limits), then the resource, owned by its session. The API's agent creation and
 * the job executor both create agents through it.
 */
export function createAgentFactory(deps: AgentFactoryDeps) {
  const { store, providers, limits, clock } = deps;

  /**
   * The organization's BYOI configuration of a provider the request names, or undefined for one
   * of this install's providers; 422 for a name that is neither.
   */
  async function providerField(principal: Principal, field: 'provider' | 'providerFallback', name: string | undefined): Promise<ByoiRef | undefined> {
    if (name === undefined) return undefined;
    const byoi = await providers.byoiConfig(principal.organizationId, principal.mode, name);
    const problem = byoi && byoiComputeProblem(name, byoi);
    if (problem) throw new ApiError('unprocessable_entity', `${field}: ${problem}`, { fields: { [field]: [problem] } });
    if (byoi || providers.get(name)) return byoi;
    const valid = providers.names();
    throw new ApiError('unprocessable_entity', `${field}: unknown provider "${name}"; this install has ${valid.join(', ')}, and BYOI providers configured with PUT /v1/providers`, {
      fields: { [field]: [`unknown provider; valid: ${valid.join(', ')} or a configured BYOI provider`] },
      validProviders: valid,
    });
  }

  return {
    /** A new agent id, for a caller that must know it before the agent is written (see `create`). */
    newId(): string {
      return newId('agt', clock.now());
    },

    /**
     * Creates an agent in the session. `id` fixes the agent's id (a caller that must not make
     * two agents after a crash chooses it first); an agent with that id already there is
     * returned as it is, unless `fresh` says the caller made the id just now with `newId`
     * (no agent can have it, so it is not looked for).
     */
    async create(
      principal: Principal,
      sessionOrRead: Resource<'Session'> | Promise<Resource<'Session'>>,
      input: CreateAgentInput,
      options: { id?: string; fresh?: boolean } = {},
    ): Promise<Resource<'Agent'>> {
      // A session still being read (the API's create) is read beside the provider's BYOI
      // configuration: two reads, one wait. Its error (404) comes first, as when read alone.
      const sessionRead = Promise.resolve(sessionOrRead);
      sessionRead.catch(() => undefined);
      assertInstallCurrency(deps.currency, 'costCap.currency', input.costCap?.currency);
      const providerName = input.provider ?? providers.defaultProvider;
      const [sessionResult, byoiResult] = await Promise.allSettled([sessionRead, providerField(principal, 'provider', providerName)]);
      if (sessionResult.status === 'rejected') throw sessionResult.reason;
      const session = sessionResult.value;
      const sessionId = objectNameToId(session.metadata.name);
      if (options.id && !options.fresh) {
        const existing = await store.get('Agent', idToObjectName(options.id));
        if (existing) return existing;
      }
      if (byoiResult.status === 'rejected') throw byoiResult.reason;
      const byoi = byoiResult.value;
      const fallbackByoi = await providerField(principal, 'providerFallback', input.providerFallback);
      // A BYOI provider that cannot be reached now is checked when it provisions (or the fallback is).
      const provider = byoi
        ? await providers.forAgent({ ...principal, mode: principal.mode, provider: providerName, byoi }).catch(() => undefined)
        : providers.get(providerName);
      const unsupported = provider ? unsupportedReason(provider, input) : undefined;
      if (unsupported?.field === 'egress') {
        throw new ApiError('not_implemented', `egress: ${unsupported.message}`, { fields: { egress: ['not implemented by this provider'] }, provider: providerName });
      }
      if (unsupported) {
        throw new ApiError('unprocessable_entity', `${unsupported.field}: ${unsupported.message}`, {
          fields: { [unsupported.field]: [unsupported.message] },
          provider: providerName,
        });
      }
      const toolProblem = toolListProblem(input.tools, input.browser);
      if (toolProblem) throw new ApiError('unprocessable_entity', `tools: ${toolProblem}`, { fields: { tools: [toolProblem] } });
      const rulesProblem = extractionRulesProblem(input.metadata);
      if (rulesProblem) throw new ApiError('unprocessable_entity', `${rulesProblem.field}: ${rulesProblem.message}`, { fields: { [rulesProblem.field]: [rulesProblem.message] } });
      const model = input.model ?? deps.defaultModel;
      const modelProblem = deps.models.problem(model);
      if (modelProblem) throw new ApiError('unprocessable_entity', `model: ${modelProblem}`, { fields: { model: [modelProblem] } });
      const timeoutSeconds = Math.min(parseDuration(input.timeout)!, MAX_TIMEOUT_SECONDS);
      const { provider: _provider, timeout: _timeout, egress: givenEgress, ...rest } = input;
      // Agents given none get the install's default allow-list, where it is enforced.
      const egress = givenEgress ?? (deps.defaultEgress && provider?.capabilities.egress ? { ...deps.defaultEgress, credentials: [] } : undefined);
      const spec: AgentSpec = {
        ...rest,
        ...(byoi ? { byoi } : {}),
        ...(egress ? { egress } : {}),
        ...(fallbackByoi ? { fallbackByoi } : {}),
        sessionId,
        organizationId: principal.organizationId,
        mode: principal.mode,
        userId: session.spec.userId,
        desiredState: 'active',
        model,
        timeout: formatDuration(timeoutSeconds),
        timeoutSeconds,
        provider: providerName,
      };
      if (input.secrets?.length) {
        await assertSecretsExist(deps.pool, { organizationId: principal.organizationId, mode: principal.mode, sessionId }, input.secrets);
      }
      if (givenEgress) await assertCredentialSecretsExist(deps.pool, { organizationId: principal.organizationId, mode: principal.mode, sessionId }, givenEgress);
      if (input.knowledge !== undefined) {
        // `true` makes the session's default collection when it has none.
        const scope = { organizationId: principal.organizationId, mode: principal.mode };
        if (!(await resolveAgentKnowledge(deps.pool, scope, sessionId, input.knowledge, clock.now())) && input.knowledge !== false) {
          throw new ApiError('unprocessable_entity', `knowledge: no collection named or with id "${String(input.knowledge)}"`, {
            fields: { knowledge: ['unknown collection'] },
          });
        }
      }
      if (Array.isArray(input.mcp)) {
        const { missing } = await resolveAgentMcp(deps.pool, { organizationId: principal.organizationId, mode: principal.mode }, input.mcp);
        if (missing.length > 0) {
          const message = `no MCP server named or with id ${missing.join(', ')}`;
          throw new ApiError('unprocessable_entity', `mcp: ${message}`, { fields: { mcp: [message] } });
        }
      }
      await limits.assertWithin(session, 'creating an agent');
      return limits.withAgentSlot(session, () =>
        store.create('Agent', {
          name: idToObjectName(options.id ?? newId('agt', clock.now())),
          labels: {
            [Labels.organization]: principal.organizationId,
            [Labels.mode]: principal.mode,
            [Labels.session]: session.metadata.name,
            // Custom pairs, so that lists can filter agents by them.
            ...metadataLabels(input.metadata),
          },
          ownerReferences: [{ kind: 'Session', name: session.metadata.name, uid: session.metadata.uid, controller: true }],
          finalizers: [SANDBOX_FINALIZER],
          spec: JSON.parse(JSON.stringify(spec)) as AgentSpec, // drops undefined fields
          status: { phase: 'booting', observedGeneration: 0, conditions: [] },
        }),
      );
    },
  };
}

export type AgentFactory = ReturnType<typeof createAgentFactory>;

/** 422 naming each egress credential whose secret neither the session nor the organization has. */
export async function assertCredentialSecretsExist(db: Pool, where: { organizationId: string; mode: Principal['mode']; sessionId: string }, egress: Egress): Promise<void> {
  const missing = new Set(await missingSecrets(db, where, [...new Set(egress.credentials.map((credential) => credential.secret))]));
  if (missing.size === 0) return;
  const fields: Record<string, string[]> = {};
  egress.credentials.forEach((credential, index) => {
    if (missing.has(credential.secret)) fields[`egress.credentials.${index}.secret`] = [`no secret named ${credential.secret} in the session or the organization`];
  });
  throw new ApiError('unprocessable_entity', `egress.credentials: no secret named ${[...missing].join(', ')} in the session or the organization`, { fields, missing: [...missing] });
}
