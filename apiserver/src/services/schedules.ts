import {
  ApiError,
  CronError,
  cancelJobsOf,
  idToObjectName,
  isTimeZone,
  listScheduleExecutions,
  newId,
  nextCronTime,
  normalizeCron,
  objectNameToId,
  parseCron,
  resolveDefinition,
  scopeLabels,
  type Clock,
  type Pool,
  type Resource,
  type ResourceStore,
} from '@berth/common';
import type { ScheduleSpec } from '@berth/crds';
import type { Principal } from '../http/context.js';
import { findOwned } from './scope.js';

/** Executions a history answer holds at most, newest first. */
export const HISTORY_LIMIT = 100;

export interface ScheduleInput {
  agent?: string | undefined;
  userId?: string | undefined;
  name?: string | undefined;
  cron?: string | undefined;
  timezone?: string | undefined;
  input?: string | Record<string, unknown> | undefined;
}

function unprocessable(field: string, problem: string): ApiError {
  return new ApiError('unprocessable_entity', `${field}: ${problem}`, { fields: { [field]: [problem] } });
}

/** 422 naming `cron` or `timezone` when the schedule could never be evaluated. */
function assertEvaluable(cron: string, timezone: string): void {
  try {
    parseCron(cron);
  } catch (error) {
    if (error instanceof CronError) throw unprocessable('cron', error.message);
    throw error;
  }
  if (!isTimeZone(timezone)) throw unprocessable('timezone', `unknown time zone "${timezone}"; give an IANA name such as "Europe/Berlin" or "UTC"`);
}

/**
 * The next run the schedule has: the reconciler's, once it has seen this generation; until then
 * (a moment after a write) the same computation from the spec, so a response never shows a time
 * the schedule no longer has.
 */
function nextRunOf(schedule: Resource<'Schedule'>, now: Date): string | null {
  const { spec, status } = schedule;
  if (spec.paused) return null;
  if (status && status.observedGeneration === schedule.metadata.generation) return status.nextRunAt ?? null;
  const activeSince = new Date(spec.activeSince);
  try {
    return nextCronTime(spec.cron, spec.timezone, activeSince > now ? activeSince : now)?.toISOString() ?? null;
  } catch {
    return null;
  }
}

export function scheduleView(schedule: Resource<'Schedule'>, now: Date) {
  const { spec, status, metadata } = schedule;
  return {
    id: objectNameToId(metadata.name),
    name: spec.name ?? null,
    agent: spec.agent,
    definitionId: spec.definitionId,
    userId: spec.userId,
    cron: spec.cron,
    timezone: spec.timezone,
    input: spec.input ?? null,
    paused: spec.paused,
    nextRunAt: nextRunOf(schedule, now),
    lastRunAt: status?.lastRunAt ?? null,
    createdAt: metadata.creationTimestamp,
  };
}
export type ScheduleView = ReturnType<typeof scheduleView>;

/**
 * Schedules: the API writes Schedule resources (their specs); the operator's Schedule reconciler
 * fires them and writes their status. History comes from the executions the reconciler records.
 */
export function createScheduleService(deps: { store: ResourceStore; pool: Pool; clock: Clock }) {
  const { store, pool, clock } = deps;
  const find = (principal: Principal, id: string) => findOwned(store, 'Schedule', 'sched', principal, id);

  return {
    async create(principal: Principal, input: ScheduleInput & { agent: string; userId: string; cron: string }): Promise<ScheduleView> {
      const timezone = input.timezone ?? 'UTC';
      const cron = normalizeCron(input.cron);
      assertEvaluable(cron, timezone);
      const definition = await resolveDefinition(pool, principal, input.agent, 'agent');
      const now = clock.now();
      const spec: ScheduleSpec = {
        organizationId: principal.organizationId,
        mode: principal.mode,
        agent: input.agent,
        definitionId: definition.id,
        userId: input.userId,
        ...(input.name !== undefined ? { name: input.name } : {}),
        cron,
        timezone,
        ...(input.input !== undefined ? { input: input.input } : {}),
        paused: false,
        activeSince: now.toISOString(),
      };
      const schedule = await store.create('Schedule', { name: idToObjectName(newId('sched', now)), labels: scopeLabels(principal), spec });
      return scheduleView(schedule, now);
    },

    /** Newest first. */
    async list(principal: Principal): Promise<{ data: ScheduleView[] }> {
      const { items } = await store.list('Schedule', { labels: scopeLabels(principal) });
      const now = clock.now();
      const newestFirst = items.sort((a, b) => b.metadata.name.localeCompare(a.metadata.name));
      return { data: newestFirst.map((schedule) => scheduleView(schedule, now)) };
    },

    async get(principal: Principal, id: string): Promise<ScheduleView> {
      return scheduleView(await find(principal, id), clock.now());
    },

    /**
     * Replaces the fields given; the others keep their stored values. A new cron or time zone
     * counts matching times from now on; a new `agent` is resolved like on creation.
     */
    async update(principal: Principal, id: string, input: ScheduleInput): Promise<ScheduleView> {
      const schedule = await find(principal, id);
      const cron = input.cron === undefined ? schedule.spec.cron : normalizeCron(input.cron);
      const timezone = input.timezone ?? schedule.spec.timezone;
      assertEvaluable(cron, timezone);
      const definition = input.agent === undefined ? undefined : await resolveDefinition(pool, principal, input.agent, 'agent');
      const now = clock.now();
      const updated = await store.updateSpec('Schedule', schedule.metadata.name, (current) => {
        const timesChange = cron !== current.spec.cron || timezone !== current.spec.timezone;
        const next: ScheduleSpec = {
          ...current.spec,
          ...(input.agent !== undefined && definition ? { agent: input.agent, definitionId: definition.id } : {}),
          ...(input.userId !== undefined ? { userId: input.userId } : {}),
          ...(input.name !== undefined ? { name: input.name } : {}),
          ...(input.input !== undefined ? { input: input.input } : {}),
          cron,
          timezone,
          ...(timesChange ? { activeSince: now.toISOString() } : {}),
        };
        return JSON.stringify(next) === JSON.stringify(current.spec) ? undefined : next;
      });
      return scheduleView(updated, now);
    },

    /** Deletes the schedule: no matching time fires from now on, and its runs not yet started are cancelled. */
    async delete(principal: Principal, id: string): Promise<{ ok: true }> {
      const schedule = await find(principal, id);
      await store.delete('Schedule', schedule.metadata.name);
      await cancelJobsOf(pool, 'schedule', objectNameToId(schedule.metadata.name), clock.now());
      return { ok: true };
    },

    /** Stops firing; pausing a paused schedule changes nothing. */
    async pause(principal: Principal, id: string): Promise<{ ok: true }> {
      const schedule = await find(principal, id);
      await store.updateSpec('Schedule', schedule.metadata.name, (current) => (current.spec.paused ? undefined : { ...current.spec, paused: true }));
      return { ok: true };
    },

    /** Fires again from the next matching time after now: the times while paused do not run. */
    async resume(principal: Principal, id: string): Promise<{ ok: true }> {
      const schedule = await find(principal, id);
      const now = clock.now();
      await store.updateSpec('Schedule', schedule.metadata.name, (current) =>
        current.spec.paused ? { ...current.spec, paused: false, activeSince: now.toISOString() } : undefined,
      );
      return { ok: true };
    },

    async history(principal: Principal, id: string) {
      const schedule = await find(principal, id);
      return { data: await listScheduleExecutions(pool, objectNameToId(schedule.metadata.name), HISTORY_LIMIT) };
    },
  };
}

export type ScheduleService = ReturnType<typeof createScheduleService>;
