import { ApiError, findTask, taskCost, type Pool, type Task } from '@berth/common';
import type { RunStarter } from '@berth/operator';
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
    ...(task.extraction && 'metadata' in task.extraction ? { metadata: task.extraction.metadata } : {}),
    ...(task.extraction && 'error' in task.extraction ? { metadataError: task.extraction.error } : {}),
    steps: task.steps,
    guardrails: task.guardrailHits,
    usage: { inputTokens: task.inputTokens, outputTokens: task.outputTokens },
    cost,
    createdAt: task.createdAt,
    startedAt: task.startedAt ?? undefined,
    finishedAt: task.finishedAt ?? undefined,
  };
}

export function createRunService(deps: { pool: Pool; agents: AgentService; runs: RunStarter; currency: string }) {
  const { pool, agents } = deps;
  return {
    /**
     * Queues a run of the agent loop, once a booting agent is ready (see `whenBooted`); the
     * checks and the one-run-at-a-time rule are the run starter's.
     */
    async start(principal: Principal, agentId: string, input: string): Promise<{ taskId: string; agentId: string }> {
      const agent = await agents.whenBooted(await agents.ensureAwake(await agents.find(principal, agentId)));
      const task = await deps.runs.start(agent, input);
      await agents.touch(agent);
      return { taskId: task.id, agentId: task.agentId };
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
