import { ApiError, findTask, getJob, isId, taskCost, type Job, type Pool } from '@berth/common';
import type { Principal } from '../http/context.js';

/**
 * A job as its caller follows it: where it came from, which session, agent and task it made,
 * its state, the task's output or the error, and the cost so far (the task's, from the ledger,
 * while it runs; what the job recorded once it ended).
 */
export function createJobService(deps: { pool: Pool; currency: string }) {
  const { pool } = deps;
  return {
    async get(principal: Principal, id: string) {
      const job: Job | undefined = isId(id, 'job') ? await getJob(pool, id, principal) : undefined;
      if (!job) throw new ApiError('not_found', `job ${id} does not exist`, { id });
      const task = job.taskId ? await findTask(pool, job.taskId) : undefined;
      const cost = job.cost ?? (job.taskId ? await taskCost(pool, job.taskId, deps.currency).then((spent) => ({ amount: spent.total, currency: spent.currency })) : { amount: 0, currency: deps.currency });
      return {
        id: job.id,
        state: job.state,
        source: { type: job.source, id: job.sourceId },
        agent: job.definitionId,
        userId: job.userId,
        input: job.input,
        sessionId: job.sessionId,
        agentId: job.agentId,
        taskId: job.taskId,
        output: task?.output ?? null,
        error: job.error,
        cost,
        createdAt: job.createdAt,
        startedAt: job.startedAt,
        finishedAt: job.finishedAt,
      };
    },
  };
}

export type JobService = ReturnType<typeof createJobService>;
