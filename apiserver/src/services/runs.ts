import {
  ApiError,
  activeTaskOf,
  findTask,
  insertTask,
  isUniqueViolation,
  newId,
  objectNameToId,
  taskCost,
  type Clock,
  type Pool,
  type Task,
} from '@berth/common';
import type { Principal } from '../http/context.js';
import type { AgentService } from './agents.js';

export function taskView(task: Task, cost: { amount: number; currency: string }) {
  return {
    id: task.id,
    agentId: task.agentId,
    sessionId: task.sessionId,
    status: task.state,
    task: task.input,
    output: task.output ?? undefined,
    error: task.error ?? undefined,
    steps: task.steps,
    usage: { inputTokens: task.inputTokens, outputTokens: task.outputTokens },
    cost,
    createdAt: task.createdAt,
    startedAt: task.startedAt ?? undefined,
    finishedAt: task.finishedAt ?? undefined,
  };
}

export function createRunService(deps: { pool: Pool; agents: AgentService; clock: Clock; currency: string }) {
  const { pool, agents, clock } = deps;
  return {
    /**
     * Queues a run of the agent loop, once a booting agent is ready (see `whenBooted`). One run at a time per agent: while one is queued or
     * running, another answers 409 `conflict` naming it (the database's unique index decides,
     * so two concurrent requests cannot both start one).
     */
    async start(principal: Principal, agentId: string, input: string): Promise<{ taskId: string; agentId: string }> {
      const agent = await agents.whenBooted(await agents.find(principal, agentId));
      await agents.assertWithinLimits(agent, 'run');
      const phase = agent.status?.phase ?? 'booting';
      if (agent.spec.desiredState !== 'active' || (phase !== 'idle' && phase !== 'running') || !agent.status?.sandbox) {
        const state = phase === 'booting' ? 'still booting' : phase;
        throw new ApiError('conflict', `agent ${agentId} is ${state}; run needs a ready agent (status idle)`, { status: phase });
      }
      // Refused now rather than queued to fail (or be retried) when the runner calls the model.
      const modelProblem = await agents.modelProblem(agent);
      if (modelProblem) throw new ApiError('unprocessable_entity', `model: ${modelProblem}`, { fields: { model: [modelProblem] }, model: agent.spec.model });
      try {
        const task = await insertTask(pool, {
          id: newId('task', clock.now()),
          organizationId: principal.organizationId,
          mode: principal.mode,
          sessionId: agent.spec.sessionId,
          agentId: objectNameToId(agent.metadata.name),
          input,
        });
        return { taskId: task.id, agentId: task.agentId };
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        const active = await activeTaskOf(pool, agentId);
        throw new ApiError('conflict', `agent ${agentId} is already running task ${active?.id ?? '(finishing)'}; one run at a time per agent`, {
          taskId: active?.id,
        });
      }
    },

    async get(principal: Principal, taskId: string) {
      const task = /^task_[0-9a-z]+$/.test(taskId) ? await findTask(pool, taskId) : undefined;
      if (!task || task.organizationId !== principal.organizationId || task.mode !== principal.mode) {
        throw new ApiError('not_found', `task ${taskId} does not exist`, { id: taskId });
      }
      const cost = await taskCost(pool, task.id, deps.currency);
      return taskView(task, { amount: cost.total, currency: cost.currency });
    },
  };
}

export type RunService = ReturnType<typeof createRunService>;
