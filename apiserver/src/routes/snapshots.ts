import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { AgentService } from '../services/agents.js';
import { resumeLevel, type SnapshotService } from '../services/snapshots.js';
import type { ProviderRegistry } from '@berth/providers';
import { agentSchema, emptyBody, idParam, okSchema } from './schemas.js';
import { agentExample, snapshotExample, snapshotResumedExample } from './examples.js';

const snapshotState = z.enum(['creating', 'ready', 'failed', 'deleting']);

export const snapshotSchema = z
  .object({
  id: z.string().describe('`snap_…`'),
  agentId: z.string(),
  sessionId: z.string(),
  provider: z.string().describe('the provider that made it'),
  type: z.enum(['pause', 'manual']),
  sizeBytes: z.number().int().describe('size of the stored archive; 0 while the snapshot is creating'),
  state: snapshotState.describe('creating (the checkpoint is on the host; its archive is being stored; the agent can already be resumed on that host) → ready (archived; resumable as a new agent); deleting after DELETE; failed when the checkpoint was lost before it was archived'),
  level: z.enum(['native', 'filesystem']).optional().describe('native: processes, memory and files; filesystem: the /workspace files'),
  createdAt: z.string(),
  })
  .meta({ id: 'Snapshot', description: 'a checkpoint of an agent' });

/** Pause and resume: a paused agent has no compute; its state is in a snapshot. */
const PAUSE_WAIT_MS = 120_000;

export function snapshotRoutes(
  table: RouteTable,
  deps: { snapshots: SnapshotService; agents: AgentService; providers: ProviderRegistry },
): void {
  const { snapshots, agents, providers } = deps;
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/pause',
      operationId: 'pauseAgent',
      tag: 'Agents',
      summary: 'Pause an agent',
      description:
        "If a run's tool call is in progress it finishes first (the run then ends as cancelled). The sandbox is checkpointed into a snapshot (`type: pause`): on the local provider natively (processes, memory and files), on Kubernetes its /workspace files. The compute is released, the agent is `paused` and `agent.paused` is written. On the local provider the agent is paused as soon as the checkpoint is on the host's disk: its snapshot is `creating` until the archive is stored, then `ready`. Answers with the agent once paused (within 2 minutes; otherwise as it is then). Pausing an agent that is not idle or running is 409 `conflict`.",
      params: idParam('agt', 'agent'),
      body: emptyBody,
      requestExample: {},
      responses: { 200: { description: 'the agent, paused', schema: agentSchema, example: { ...agentExample, status: 'paused', pauseReason: 'requested' } } },
      errors: ['not_found', 'conflict', 'unprocessable_entity'],
      handler: async ({ principal, params }) => ({ status: 200, body: await agents.pause(principal, params.id, PAUSE_WAIT_MS) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/resume',
      operationId: 'resumeAgent',
      tag: 'Agents',
      summary: 'Resume a paused agent',
      description:
        "Restores the agent from its latest pause snapshot: natively where the provider can (its processes continue with their memory), else its /workspace files. On the host that paused it, the checkpoint kept there is restored, without waiting for the snapshot's archive; elsewhere the resume waits until the snapshot is `ready`. Answers with the agent once it is ready (`idle`) again. Resuming an agent that is not paused is 409 `conflict`.",
      params: idParam('agt', 'agent'),
      body: emptyBody,
      requestExample: {},
      responses: { 200: { description: 'the agent, running again', schema: agentSchema, example: agentExample } },
      errors: ['not_found', 'conflict', 'unprocessable_entity', 'session_limit_exceeded'],
      handler: async ({ principal, params }) => ({
        status: 200,
        body: await agents.resume(principal, params.id, PAUSE_WAIT_MS, async (snapshotId) => {
          const snapshot = await snapshots.find(principal, snapshotId);
          // The agent resumes on the provider that holds it, BYOI ones included: natively when
          // that provider made the snapshot natively and can restore that way.
          const agent = await agents.find(principal, params.id);
          const provider = await providers.holding(agent.spec, agent.status?.provider).catch(() => undefined);
          if (provider && !providers.get(provider.name)) {
            const native = snapshot.status?.level === 'native' && provider.name === snapshot.spec.provider && provider.capabilities.checkpoint === 'native';
            return native ? 'native' : 'filesystem';
          }
          return resumeLevel(snapshot, snapshot.spec.provider, providers);
        }),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/snapshots',
      operationId: 'listSnapshots',
      tag: 'Snapshots',
      summary: 'List snapshots',
      description: 'Newest first. Filter by `sessionId`, `agentId` and `state`.',
      query: z
        .object({
          sessionId: z.string().regex(/^ses_[0-9a-z]+$/, 'must be a session id').optional(),
          agentId: z.string().regex(/^agt_[0-9a-z]+$/, 'must be an agent id').optional(),
          state: snapshotState.optional(),
        })
        .strict(),
      responses: { 200: { description: 'the snapshots', schema: z.object({ data: z.array(snapshotSchema) }), example: { data: [snapshotExample] } } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, query }) => ({ status: 200, body: await snapshots.list(principal, query) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/snapshots/:id',
      operationId: 'getSnapshot',
      tag: 'Snapshots',
      summary: 'Get a snapshot',
      description: 'One snapshot.',
      params: idParam('snap', 'snapshot'),
      responses: { 200: { description: 'the snapshot', schema: snapshotSchema, example: snapshotExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await snapshots.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/snapshots/:id/resume',
      operationId: 'resumeSnapshot',
      tag: 'Snapshots',
      summary: 'Resume a snapshot as a new agent',
      description:
        "Creates a new agent with the settings of the snapshot's agent, started from the snapshot: `native` (processes, memory and files) on the provider that made it when it can restore natively, `filesystem` (the /workspace files) on any other. Only `ready` snapshots (else 409 `conflict`); a deleted snapshot is 404. The new agent counts against its session's limits like a created one: 402 `session_limit_exceeded` while the session has reached a limit or holds `maxAgents` agents. Poll the new agent until it is `idle`.",
      params: idParam('snap', 'snapshot'),
      body: z
        .object({
          provider: z.string().min(1).max(64).optional().describe("default: the snapshot's provider"),
          region: z.string().min(1).max(64).default('us-east-1'),
          level: z
            .literal('filesystem')
            .optional()
            .describe('bring back only the /workspace files, even where a native resume is possible (beyond the spec)'),
        })
        .strict(),
      requestExample: { provider: 'local', region: 'us-east-1' },
      responses: {
        201: {
          description: 'the new agent, booting',
          example: snapshotResumedExample,
          schema: z.object({
            agentId: z.string(),
            provider: z.string(),
            region: z.string(),
            resumeLevel: z.enum(['native', 'filesystem']),
            status: z.literal('booting'),
          })
          .meta({ id: 'SnapshotResumed' }),
        },
      },
      errors: ['not_found', 'conflict', 'unprocessable_entity', 'session_limit_exceeded'],
      handler: async ({ principal, params, body }) => ({ status: 201, body: await snapshots.resume(principal, params.id, body) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/snapshots/:id',
      operationId: 'deleteSnapshot',
      tag: 'Snapshots',
      summary: 'Delete a snapshot',
      description: 'Releases its stored archive; it can no longer be resumed (while deletion finishes it shows `deleting`, then 404).',
      params: idParam('snap', 'snapshot'),
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found', 'conflict'],
      handler: async ({ principal, params }) => {
        await snapshots.delete(principal, params.id);
        return { status: 200, body: { ok: true } };
      },
    }),
  );
}
