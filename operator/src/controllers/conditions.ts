import type { Condition } from '@berth/crds';

/**
 * Sets one condition, keeping `lastTransitionTime` when its status did not change,
 * as Kubernetes' meta.SetStatusCondition does. Returns a new array.
 */
export function setCondition(
  conditions: readonly Condition[],
  update: Omit<Condition, 'lastTransitionTime'>,
  now: Date,
): Condition[] {
  const existing = conditions.find((condition) => condition.type === update.type);
  const lastTransitionTime =
    existing && existing.status === update.status ? existing.lastTransitionTime : now.toISOString();
  const next: Condition = { ...update, lastTransitionTime };
  return existing
    ? conditions.map((condition) => (condition.type === update.type ? next : condition))
    : [...conditions, next];
}

export function findCondition(conditions: readonly Condition[], type: string): Condition | undefined {
  return conditions.find((condition) => condition.type === type);
}
