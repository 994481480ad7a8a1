import {
  ApiError,
  activeTaskOf,
  findTask,
  idToObjectName,
  insertTask,
  isUniqueViolation,
  newId,
  objectNameToId,
  type Clock,
  type LimitGuard,
  type Pool,
  type Resource,
  type ResourceStore,
  type ConversationTurn,
  type Task,
} from '@berth/common';
import type { Message } from '../runner/models/types.js';

/** A turn of a conversation as the loop's message: an earlier answer called no tools. */
function loopMessageOf(turn: ConversationTurn): Message {
  return turn.role === 'assistant' ? { role: 'assistant', content: turn.content, toolCalls: [] } : { role: 'user', content: turn.content };
}
import type { ModelRouter } from '../runner/models/router.js';

/**
 * Starts runs of the agent loop: the checks a run passes (the session's limits, a ready agent, a
 * usable model), then the queued task that a runner takes. The API's `run` and the job executor
 * both start runs through it.
 */
export function createRunStarter(deps: { pool: Pool; store: ResourceStore; limits: LimitGuard; models: Pick<ModelRouter, 'unusableReason'>; clock: Clock }) {
  const { pool, store, limits, clock } = deps;

  /** 402 while the agent's session has reached a limit. `read`: the session, read with the agent (else it is read here). */
  async function assertWithinLimits(agent: Resource<'Agent'>, action: string, read?: Resource<'Session'>): Promise<void> {
    const name = idToObjectName(agent.spec.sessionId);
    const session = read?.metadata.name === name ? read : await store.get('Session', name);
    if (session) await limits.assertWithin(session, action);
  }

  /**
   * Why a run of the agent could not call its model now (its vendor has no key here and the
   * organization configured none), or undefined. Test keys answer with the mock model: none.
   */
  async function modelProblem(agent: Resource<'Agent'>): Promise<string | undefined> {
    if (agent.spec.mode === 'test' || agent.spec.model === undefined) return undefined;
    return deps.models.unusableReason(agent.spec.organizationId, agent.spec.model);
  }

  return {
    assertWithinLimits,
    modelProblem,

    /**
     * Queues a run of a ready agent. One run at a time per agent: while one is queued or running,
     * another is 409 `conflict` naming it (the database's unique index decides, so two concurrent
     * calls cannot both start one). `taskId` fixes the task's id; a task with it already there is
     * returned as it is. `history`: earlier turns of a conversation the run continues (the model
     * sees them, then `input`).
     */
    async start(agent: Resource<'Agent'>, input: string, options: { taskId?: string; history?: ConversationTurn[] | undefined } = {}): Promise<Task> {
      const agentId = objectNameToId(agent.metadata.name);
      if (options.taskId) {
        const existing = await findTask(pool, options.taskId);
        if (existing) return existing;
      }
      await assertWithinLimits(agent, 'run');
      const phase = agent.status?.phase ?? 'booting';
      if (agent.spec.desiredState !== 'active' || (phase !== 'idle' && phase !== 'running') || !agent.status?.sandbox) {
        const state = phase === 'booting' ? 'still booting' : phase;
        throw new ApiError('conflict', `agent ${agentId} is ${state}; run needs a ready agent (status idle)`, { status: phase });
      }
      // Refused now rather than queued to fail (or be retried) when the runner calls the model.
      const problem = await modelProblem(agent);
      if (problem) throw new ApiError('unprocessable_entity', `model: ${problem}`, { fields: { model: [problem] }, model: agent.spec.model });
      try {
        return await insertTask(pool, {
          id: options.taskId ?? newId('task', clock.now()),
          organizationId: agent.spec.organizationId,
          mode: agent.spec.mode,
          sessionId: agent.spec.sessionId,
          agentId,
          input,
          ...(options.history?.length ? { conversation: [...options.history.map(loopMessageOf), { role: 'user', content: input }] } : {}),
        });
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        const active = await activeTaskOf(pool, agentId);
        throw new ApiError('conflict', `agent ${agentId} is already running task ${active?.id ?? '(finishing)'}; one run at a time per agent`, {
          taskId: active?.id,
        });
      }
    },
  };
}

export type RunStarter = ReturnType<typeof createRunStarter>;
