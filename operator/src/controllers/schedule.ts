import {
  CronError,
  attachExecutionJob,
  claimScheduledTime,
  cronTimesBetween,
  enqueueJob,
  isTimeZone,
  latestScheduledTimes,
  nextCronTime,
  objectNameToId,
  parseCron,
  recordEvent,
  withTransaction,
  type Clock,
  type CronFields,
  type Logger,
  type Pool,
  type Resource,
  type ResourceStore,
} from '@berth/common';
import type { Condition, ScheduleStatus } from '@berth/crds';
import { Counter, type Registry } from 'prom-client';
import type { ReconcileResult, Reconciler } from '../runtime/controller.js';
import { setCondition } from './conditions.js';

/**
 * A matching time that came due while no operator ran still runs when an operator sees it within
 * this long after the time; older ones are recorded as `missed` (ADR 23).
 */
export const SCHEDULE_GRACE_MS = 15 * 60_000;

/** Matching times one reconcile handles; more (a long outage of a frequent schedule) continue at once. */
export const MAX_TIMES_PER_RECONCILE = 200;

/** The longest a reconcile waits for its next time before looking again (timers drift; resyncs too). */
export const MAX_REQUEUE_MS = 10 * 60_000;

export const ScheduleConditions = {
  /** True when the schedule has a next time to run; False while paused or when cron or time zone is unusable. */
  Scheduled: 'Scheduled',
} as const;

export const ScheduleReasons = {
  Active: 'Active',
  Paused: 'Paused',
  InvalidCron: 'InvalidCron',
  InvalidTimeZone: 'InvalidTimeZone',
  NoFutureTime: 'NoFutureTime',
} as const;

export interface ScheduleMetrics {
  times: Counter<'outcome'>;
}

export function createScheduleMetrics(registry: Registry): ScheduleMetrics {
  return {
    times: new Counter({
      name: 'berth_schedule_times_total',
      help: 'Matching times of schedules that came due, by outcome: fired (this reconcile claimed it), missed (past the grace window), duplicate (claimed before)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
  };
}

export interface ScheduleReconcilerDeps {
  store: ResourceStore;
  db: Pool;
  clock: Clock;
  metrics: ScheduleMetrics;
  graceMs?: number;
}

/** The task text of a schedule without `input`. */
export function defaultScheduleInput(schedule: Resource<'Schedule'>, scheduledFor: Date): string {
  return `Scheduled run of "${schedule.spec.name ?? objectNameToId(schedule.metadata.name)}" for ${scheduledFor.toISOString()}.`;
}

/**
 * The Schedule reconciler (leader only): fires every matching time that came due since the
 * schedule became active or last fired (each once: the claim row in schedule_executions decides,
 * in the transaction that queues its job and writes `schedule.fired`), records times past the
 * grace window as missed, writes `status.nextRunAt` and `lastRunAt`, and requeues itself for the
 * next time. Level-triggered: it reads only the schedule and its claims, so running it twice, on
 * two replicas or after a crash, fires nothing twice.
 */
export function createScheduleReconciler(deps: ScheduleReconcilerDeps): Reconciler {
  const { store, db, clock } = deps;
  const graceMs = deps.graceMs ?? SCHEDULE_GRACE_MS;

  async function fire(schedule: Resource<'Schedule'>, scheduledFor: Date, log: Logger): Promise<'fired' | 'missed' | 'duplicate'> {
    const now = clock.now();
    const { spec } = schedule;
    const scope = { scheduleId: objectNameToId(schedule.metadata.name), organizationId: spec.organizationId, mode: spec.mode };
    const late = now.getTime() - scheduledFor.getTime() > graceMs;
    return withTransaction(db, async (tx) => {
      const executionId = await claimScheduledTime(tx, scope, scheduledFor, late ? 'missed' : 'fired', now);
      if (!executionId) return 'duplicate';
      if (late) {
        log.warn({ scheduledFor: scheduledFor.toISOString(), graceMs }, 'matching time is past the grace window; recorded as missed');
        return 'missed';
      }
      const job = await enqueueJob(
        tx,
        {
          organizationId: spec.organizationId,
          mode: spec.mode,
          source: 'schedule',
          sourceId: scope.scheduleId,
          userId: spec.userId,
          definitionId: spec.definitionId,
          input: spec.input ?? defaultScheduleInput(schedule, scheduledFor),
        },
        now,
      );
      await attachExecutionJob(tx, executionId, job.id);
      await recordEvent(
        tx,
        {
          type: 'schedule.fired',
          organizationId: spec.organizationId,
          mode: spec.mode,
          subjectId: scope.scheduleId,
          occurrence: `${scope.scheduleId}/schedule.fired/${scheduledFor.toISOString()}`,
          data: {
            scheduleId: scope.scheduleId,
            name: spec.name ?? null,
            executionId,
            jobId: job.id,
            scheduledFor: scheduledFor.toISOString(),
            firedAt: now.toISOString(),
            userId: spec.userId,
            agent: spec.agent,
            definitionId: spec.definitionId,
          },
        },
        now,
      );
      log.info({ scheduledFor: scheduledFor.toISOString(), executionId, jobId: job.id }, 'schedule fired');
      return 'fired';
    });
  }

  return async function reconcileSchedule(name: string, log: Logger): Promise<ReconcileResult> {
    const schedule = await store.get('Schedule', name);
    if (!schedule || schedule.metadata.deletionTimestamp) return {};
    const { spec } = schedule;
    const scheduleId = objectNameToId(name);
    const now = clock.now();

    let fields: CronFields | undefined;
    let problem: { reason: string; message: string } | undefined;
    try {
      fields = parseCron(spec.cron);
    } catch (error) {
      if (!(error instanceof CronError)) throw error;
      problem = { reason: ScheduleReasons.InvalidCron, message: `cron: ${error.message}` };
    }
    if (!problem && !isTimeZone(spec.timezone)) problem = { reason: ScheduleReasons.InvalidTimeZone, message: `timezone: unknown time zone "${spec.timezone}"` };

    let more = false;
    let nextRunAt: Date | undefined;
    if (fields && !problem && !spec.paused) {
      const activeSince = new Date(spec.activeSince);
      const { claimed } = await latestScheduledTimes(db, scheduleId);
      const since = claimed && claimed > activeSince ? claimed : activeSince;
      const due = cronTimesBetween(fields, spec.timezone, since, now, MAX_TIMES_PER_RECONCILE);
      for (const time of due) deps.metrics.times.inc({ outcome: await fire(schedule, time, log) });
      more = due.length === MAX_TIMES_PER_RECONCILE;
      nextRunAt = nextCronTime(fields, spec.timezone, more ? due[due.length - 1]! : since > now ? since : now);
    }
    const { fired } = await latestScheduledTimes(db, scheduleId);

    const condition: Omit<Condition, 'lastTransitionTime'> = problem
      ? { type: ScheduleConditions.Scheduled, status: 'False', reason: problem.reason, message: problem.message, observedGeneration: schedule.metadata.generation }
      : spec.paused
        ? { type: ScheduleConditions.Scheduled, status: 'False', reason: ScheduleReasons.Paused, message: 'paused; resume to run at the next matching time', observedGeneration: schedule.metadata.generation }
        : nextRunAt
          ? { type: ScheduleConditions.Scheduled, status: 'True', reason: ScheduleReasons.Active, message: `next run at ${nextRunAt.toISOString()}`, observedGeneration: schedule.metadata.generation }
          : { type: ScheduleConditions.Scheduled, status: 'False', reason: ScheduleReasons.NoFutureTime, message: 'the cron expression matches no future time', observedGeneration: schedule.metadata.generation };
    const status: ScheduleStatus = {
      observedGeneration: schedule.metadata.generation,
      conditions: setCondition(schedule.status?.conditions ?? [], condition, now),
      ...(nextRunAt ? { nextRunAt: nextRunAt.toISOString() } : {}),
      ...(fired ? { lastRunAt: fired.toISOString() } : {}),
    };
    if (JSON.stringify(status) !== JSON.stringify(schedule.status)) await store.updateStatus('Schedule', name, status);

    if (more) return { requeueAfterMs: 0 };
    if (!nextRunAt) return {};
    return { requeueAfterMs: Math.min(Math.max(0, nextRunAt.getTime() - clock.now().getTime()), MAX_REQUEUE_MS) };
  };
}
