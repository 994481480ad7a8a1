import { z } from 'zod';
import { MAX_WARM_POOL_SIZE, computeSchema, conditionSchema } from '@berth/crds';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { WarmPoolService } from '../services/warm-pools.js';
import { idParam, okSchema } from './schemas.js';

const TAG = 'Warm pools';

const sizeSchema = z.number().int('must be a whole number of sandboxes').min(0).max(MAX_WARM_POOL_SIZE, `must be at most ${MAX_WARM_POOL_SIZE}`);

const warmPoolSchema = z
  .object({
    id: z.string().describe('`wpl_…`'),
    provider: z.string(),
    compute: computeSchema,
    browser: z.boolean(),
    definition: z.string().optional().describe('only agents made from this definition (`adef_…`) claim from the pool'),
    size: z.number().int().describe('unclaimed sandboxes the pool keeps started'),
    ready: z.number().int().describe('unclaimed sandboxes ready to be claimed now'),
    starting: z.number().int().describe('sandboxes being started to refill the pool'),
    claims: z.number().int().describe('sandboxes agents claimed from the pool since it was made'),
    conditions: z.array(conditionSchema).describe('`Filled`: True when `ready` reached `size`, else why not'),
    createdAt: z.string(),
  })
  .meta({ id: 'WarmPool' });

const createBody = z
  .object({
    compute: computeSchema.default('python').describe('the compute of the agents that claim its sandboxes'),
    browser: z.boolean().default(false).describe('browser sandboxes, for browser agents'),
    definition: z.string().min(1).max(200).optional().describe('agent definition name or id: only its agents claim from this pool (they take it before a pool without definition)'),
    size: sizeSchema.describe(`sandboxes to keep started, 0–${MAX_WARM_POOL_SIZE}`),
    provider: z.string().min(1).max(64).optional().describe("one of this install's providers that can keep warm sandboxes (local, kubernetes); the default provider when omitted"),
  })
  .strict();

const example = {
  id: 'wpl_01m80gqv9d4kjqfcmvs2q4jxem',
  provider: 'local',
  compute: 'python' as const,
  browser: false,
  size: 4,
  ready: 4,
  starting: 0,
  claims: 17,
  conditions: [
    { type: 'Filled', status: 'True' as const, reason: 'Filled', message: '4 sandboxes ready', lastTransitionTime: '2026-11-23T17:02:11.093Z', observedGeneration: 1 },
  ],
  createdAt: '2026-11-23T16:58:02.412Z',
};

export function warmPoolRoutes(table: RouteTable, pools: WarmPoolService): void {
  const id = idParam('wpl', 'warm pool');
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/warm-pools',
      operationId: 'createWarmPool',
      tag: TAG,
      summary: 'Create a warm pool',
      description:
        "Keeps `size` sandboxes of the organization started ahead of the agents that will take them. A new agent of the same provider, compute and browser (and definition, for a pool of one) claims a ready sandbox instead of starting one: it is `idle` within milliseconds on the local provider, a few hundred on Kubernetes (where it adopts a running pod), and gets its secrets and environment through the sandbox's launcher after the claim (the pool's sandbox never holds them before). An agent that finds none ready starts cold, as without a pool. The operator starts a new sandbox for each one claimed. One pool per shape: a second is 409 `conflict`. The sizes of an organization's pools add up to at most the install's `BERTH_WARM_SANDBOXES_MAX` (20 by default): past it, 422 naming `size`. A provider that cannot keep warm sandboxes (the local and Kubernetes providers can; on Kubernetes a pool's sandboxes are pods that the agent adopts), a compute or browser it cannot run, or an unknown definition is 422. Test keys' pools are kept but hold no sandboxes (their agents run on the mock provider).",
      body: createBody,
      requestExample: { compute: 'python', size: 4 },
      responses: { 201: { description: 'the pool; its sandboxes start within a moment', schema: warmPoolSchema, example: { ...example, ready: 0, starting: 0, claims: 0, conditions: [] } } },
      errors: ['unprocessable_entity', 'conflict'],
      handler: async ({ principal, body }) => ({ status: 201, body: await pools.create(principal, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/warm-pools',
      operationId: 'listWarmPools',
      tag: TAG,
      summary: 'List warm pools',
      description: "The organization's warm pools, newest first (one page: there is at most one per shape).",
      responses: { 200: { description: 'the pools', schema: z.object({ data: z.array(warmPoolSchema), hasMore: z.boolean() }), example: { data: [example], hasMore: false } } },
      errors: [],
      handler: async ({ principal }) => ({ status: 200, body: await pools.list(principal) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/warm-pools/:id',
      operationId: 'getWarmPool',
      tag: TAG,
      summary: 'Get a warm pool',
      description: 'The pool with its sandboxes ready, starting and claimed so far.',
      params: id,
      responses: { 200: { description: 'the pool', schema: warmPoolSchema, example } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await pools.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'patch',
      path: '/v1/warm-pools/:id',
      operationId: 'resizeWarmPool',
      tag: TAG,
      summary: 'Resize a warm pool',
      description: "Changes how many sandboxes the pool keeps: more are started, or the newest unclaimed ones ended, within a moment. Its shape cannot change (delete it and make another). Past the install's cap on an organization's warm sandboxes, 422 naming `size`; a pool being deleted is 409.",
      params: id,
      body: z.object({ size: sizeSchema.describe(`sandboxes to keep started, 0–${MAX_WARM_POOL_SIZE}`) }).strict(),
      requestExample: { size: 8 },
      responses: { 200: { description: 'the pool', schema: warmPoolSchema, example: { ...example, size: 8 } } },
      errors: ['not_found', 'unprocessable_entity', 'conflict'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await pools.resize(principal, params.id, body.size) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/warm-pools/:id',
      operationId: 'deleteWarmPool',
      tag: TAG,
      summary: 'Delete a warm pool',
      description: 'Ends the sandboxes of the pool that no agent claimed, then the pool; answers once they are gone (or after 30 s, when the operator goes on). Agents that claimed a sandbox keep it.',
      params: id,
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => {
        await pools.delete(principal, params.id);
        return { status: 200, body: { ok: true as const } };
      },
    }),
  );
}
