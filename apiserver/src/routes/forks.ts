import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { MAX_FORKS, type ForkService } from '../services/forks.js';
import { idParam } from './schemas.js';

const forkedSchema = z
  .object({
    agentId: z.string().describe('the agent forked'),
    snapshotId: z.string().describe('the checkpoint the forks continue from (`snap_…`)'),
    level: z.enum(['native', 'filesystem']).describe('native: processes, memory and files; filesystem: the /workspace files'),
    agents: z.array(z.object({ id: z.string(), status: z.literal('booting') })).describe('the new agents, booting: poll each until `idle`'),
  })
  .meta({ id: 'Forked' });

export function forkRoutes(table: RouteTable, forks: ForkService): void {
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/fork',
      operationId: 'forkAgent',
      tag: 'Agents',
      summary: 'Fork an agent',
      description:
        `Makes \`count\` (1–${MAX_FORKS}) new agents that continue from one checkpoint of this one, each on its own from then on. A running or idle agent is checkpointed (paused with reason \`fork\`, its run's tool call in flight finishing first) and resumed from that checkpoint before the answer; a paused agent's pause snapshot is used. ` +
        'On the local provider the forks restore the same checkpoint natively: processes with their memory, and the files; on a provider that cannot (Kubernetes), the /workspace files. Each fork is an agent of the same session with the same settings (secrets, lifecycle, tools) and counts against its limits (402 `session_limit_exceeded` when a fork would pass `maxAgents`; the forks made before stay). Calls on the agent while it is checkpointed wait for it. 409 for an agent that is booting, ended, or paused without a snapshot.',
      params: idParam('agt', 'agent'),
      body: z.object({ count: z.number().int('must be a whole number').min(1).max(MAX_FORKS, `must be at most ${MAX_FORKS}`).default(1).describe(`how many forks, 1–${MAX_FORKS}`) }).strict(),
      requestExample: { count: 3 },
      responses: {
        201: {
          description: 'the forks, booting',
          schema: forkedSchema,
          example: {
            agentId: 'agt_01m80gqvefwgc4tgw5batt7zt1',
            snapshotId: 'snap_01m80gqw3k7d2x9c4b5n6m7p8q',
            level: 'native',
            agents: [{ id: 'agt_01m80gqx1a2b3c4d5e6f7g8h9j', status: 'booting' }],
          },
        },
      },
      errors: ['not_found', 'unprocessable_entity', 'conflict', 'session_limit_exceeded'],
      handler: async ({ principal, params, body }) => ({ status: 201, body: await forks.fork(principal, params.id, body.count) }),
    }),
  );
}
