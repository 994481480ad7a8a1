import { ApiError, Labels, idToObjectName, newId, objectNameToId, resolveDefinition, scopeLabels, waitForResource, type Clock, type Pool, type Resource, type ResourceStore } from '@berth/common';
import { WARM_SANDBOXES_FINALIZER, type Compute } from '@berth/crds';
import type { ProviderRegistry } from '@berth/providers';
import type { Principal } from '../http/context.js';
import { findOwned } from './scope.js';

/** How long `DELETE /v1/warm-pools/{id}` waits for the pool's sandboxes to be ended before it answers anyway. */
const DELETE_WAIT_MS = 30_000;

export function warmPoolView(pool: Resource<'WarmPool'>) {
  const { spec, status, metadata } = pool;
  return {
    id: objectNameToId(metadata.name),
    provider: spec.provider,
    compute: spec.compute,
    browser: spec.browser,
    definition: spec.definition,
    size: spec.size,
    ready: status?.ready ?? 0,
    starting: status?.starting ?? 0,
    claims: status?.claims ?? 0,
    conditions: status?.conditions ?? [],
    createdAt: metadata.creationTimestamp,
  };
}
export type WarmPoolView = ReturnType<typeof warmPoolView>;

export interface CreateWarmPoolInput {
  compute: Compute;
  browser: boolean;
  definition?: string | undefined;
  size: number;
  provider?: string | undefined;
}

/**
 * Warm pools of the caller's organization and mode (ADR 45): one per shape (provider, compute,
 * browser, definition). The routes write the WarmPool resource; the operator starts, refills and
 * ends its sandboxes.
 */
export function createWarmPoolService(deps: { store: ResourceStore; pool: Pool; providers: ProviderRegistry; clock: Clock; maxSandboxes: number }) {
  const { store, providers } = deps;
  const find = (principal: Principal, id: string) => findOwned(store, 'WarmPool', 'wpl', principal, id);

  async function all(principal: Principal): Promise<Resource<'WarmPool'>[]> {
    const { items } = await store.list('WarmPool', { labels: scopeLabels(principal), order: 'desc', limit: 1000 });
    return items;
  }

  /** 422 naming `size` when the organization's pools would keep more sandboxes than the install allows. */
  async function assertWithinCap(principal: Principal, size: number, except?: string): Promise<void> {
    const others = (await all(principal)).filter((pool) => pool.metadata.name !== except).reduce((sum, pool) => sum + pool.spec.size, 0);
    if (others + size <= deps.maxSandboxes) return;
    const left = Math.max(0, deps.maxSandboxes - others);
    throw new ApiError('unprocessable_entity', `size: this install lets an organization keep ${deps.maxSandboxes} warm sandboxes (BERTH_WARM_SANDBOXES_MAX); its other pools keep ${others}, so at most ${left} here`, {
      fields: { size: [`at most ${left}`] },
    });
  }

  return {
    async create(principal: Principal, input: CreateWarmPoolInput): Promise<WarmPoolView> {
      const providerName = input.provider ?? providers.defaultProvider;
      const provider = providers.get(providerName);
      if (!provider) {
        throw new ApiError('unprocessable_entity', `provider: unknown provider "${providerName}"; this install has ${providers.names().join(', ')}`, {
          fields: { provider: ['unknown provider'] },
        });
      }
      if (principal.mode === 'live' && !provider.startWarm) {
        throw new ApiError('unprocessable_entity', `provider: provider "${providerName}" cannot keep warm sandboxes (the local and Kubernetes providers can)`, {
          fields: { provider: ['cannot keep warm sandboxes'] },
        });
      }
      if (input.browser && !provider.capabilities.browser) {
        throw new ApiError('unprocessable_entity', `browser: provider "${providerName}" has no browser-capable sandbox template configured`, { fields: { browser: ['no browser template'] } });
      }
      if (!provider.capabilities.computes.includes(input.compute)) {
        throw new ApiError('unprocessable_entity', `compute: provider "${providerName}" cannot run compute "${input.compute}"`, { fields: { compute: ['not supported by the provider'] } });
      }
      const definition = input.definition === undefined ? undefined : (await resolveDefinition(deps.pool, principal, input.definition, 'definition')).id;
      const taken = (await all(principal)).find(
        (pool) => pool.spec.provider === providerName && pool.spec.compute === input.compute && pool.spec.browser === input.browser && pool.spec.definition === definition,
      );
      if (taken) {
        throw new ApiError('conflict', `warm pool ${objectNameToId(taken.metadata.name)} already keeps sandboxes of this shape; change its size instead`, {
          id: objectNameToId(taken.metadata.name),
        });
      }
      await assertWithinCap(principal, input.size);
      const id = newId('wpl', deps.clock.now());
      const created = await store.create('WarmPool', {
        name: idToObjectName(id),
        labels: { ...scopeLabels(principal), [Labels.id]: id },
        finalizers: [WARM_SANDBOXES_FINALIZER],
        spec: {
          organizationId: principal.organizationId,
          mode: principal.mode,
          provider: providerName,
          compute: input.compute,
          browser: input.browser,
          ...(definition !== undefined ? { definition } : {}),
          size: input.size,
        },
      });
      return warmPoolView(created);
    },

    async list(principal: Principal): Promise<{ data: WarmPoolView[]; hasMore: false }> {
      return { data: (await all(principal)).map(warmPoolView), hasMore: false };
    },

    async get(principal: Principal, id: string): Promise<WarmPoolView> {
      return warmPoolView(await find(principal, id));
    },

    async resize(principal: Principal, id: string, size: number): Promise<WarmPoolView> {
      const pool = await find(principal, id);
      if (pool.metadata.deletionTimestamp) throw new ApiError('conflict', `warm pool ${id} is being deleted`);
      await assertWithinCap(principal, size, pool.metadata.name);
      return warmPoolView(await store.updateSpec('WarmPool', pool.metadata.name, (current) => (current.spec.size === size ? undefined : { ...current.spec, size })));
    },

    /** Deletes the pool; answers once its unclaimed sandboxes are ended (or after a wait, regardless). */
    async delete(principal: Principal, id: string): Promise<void> {
      const pool = await find(principal, id);
      await store.delete('WarmPool', pool.metadata.name);
      await waitForResource(store, 'WarmPool', pool.metadata.name, DELETE_WAIT_MS, (current) => current === undefined);
    },
  };
}

export type WarmPoolService = ReturnType<typeof createWarmPoolService>;
