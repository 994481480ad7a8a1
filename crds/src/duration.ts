/**
 * Durations as users write them: `30s`, `5m`, `2h`, or a combination in
 * descending units such as `1h30m`. Anything else is rejected rather than guessed.
 */
const DURATION_PATTERN = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

/**
 * The same rule as a regular expression for OpenAPI and CRD schemas, in the RE2 subset the
 * Kubernetes API server evaluates (no lookahead): together with a minimum length of 2 it
 * admits exactly what `parseDuration` does.
 */
export const DURATION_PATTERN_SOURCE = '^([0-9]+h)?([0-9]+m)?([0-9]+s)?$';

export function parseDuration(text: string): number | undefined {
  if (text.length === 0 || text.length > 32) return undefined;
  const match = DURATION_PATTERN.exec(text);
  if (!match) return undefined;
  const [, hours, minutes, seconds] = match;
  if (hours === undefined && minutes === undefined && seconds === undefined) return undefined;
  return Number(hours ?? 0) * 3600 + Number(minutes ?? 0) * 60 + Number(seconds ?? 0);
}

/** The shortest canonical spelling of a number of seconds: 90 → `1m30s`, 7200 → `2h`. */
export function formatDuration(totalSeconds: number): string {
  if (!Number.isInteger(totalSeconds) || totalSeconds < 0) {
    throw new RangeError(`not a whole non-negative number of seconds: ${totalSeconds}`);
  }
  if (totalSeconds === 0) return '0s';
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = totalSeconds % 60;
  return `${hours ? `${hours}h` : ''}${minutes ? `${minutes}m` : ''}${seconds ? `${seconds}s` : ''}`;
}
