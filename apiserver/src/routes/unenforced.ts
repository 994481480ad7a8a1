import { ApiError } from '@berth/common';

/**
 * Agent creation fields the spec names that Berth does not enforce yet. They are refused with
 * 501 naming the field rather than stored and ignored: an agent created with an approval policy
 * must not run its tools unapproved.
 */
export const UNENFORCED_AGENT_FIELDS = {
  lifecycle: 'lifecycle policies (auto-pause, failure policy)',
  knowledge: 'knowledge collections',
  mcp: 'MCP connections',
} as const;

/** Throws 501 `not_implemented` for the first unenforced field present; `prefix` names where it was written (`overrides.`). */
export function refuseUnenforcedFields(fields: Record<string, unknown>, prefix = ''): void {
  for (const [field, what] of Object.entries(UNENFORCED_AGENT_FIELDS)) {
    if (fields[field] === undefined) continue;
    const name = `${prefix}${field}`;
    throw new ApiError('not_implemented', `${what} are not enforced yet; remove "${name}"`, {
      fields: { [name]: ['not implemented'] },
    });
  }
}
