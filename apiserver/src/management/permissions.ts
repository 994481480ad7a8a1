import type { Role } from '@berth/common';

/**
 * The spec's permission table (Roles, management plane), one entry per row: the roles that
 * hold the permission. Every `/api` route names one of these, and the guard checks it on every
 * request against the caller's role as it is in the database at that moment.
 */
export const PERMISSIONS = {
  /** Delete organization; transfer ownership. */
  'organization.delete': ['owner'],
  'ownership.transfer': ['owner'],
  /** Update org settings. */
  'organization.update': ['owner', 'admin'],
  /** Invite, change roles, remove members. */
  'team.manage': ['owner', 'admin'],
  'team.view': ['owner', 'admin', 'member', 'viewer'],
  /** Create / revoke API keys. */
  'keys.manage': ['owner', 'admin'],
  /** View keys (prefix only). */
  'keys.view': ['owner', 'admin', 'member', 'viewer'],
  /** Change plan / set budgets. */
  'billing.manage': ['owner', 'admin'],
  /** View billing and usage. */
  'billing.view': ['owner', 'admin', 'member', 'viewer'],
  /** Create / update secrets. */
  'secrets.write': ['owner', 'admin', 'member'],
  'secrets.delete': ['owner', 'admin'],
  /** View secret names. */
  'secrets.view': ['owner', 'admin', 'member', 'viewer'],
  /** Configure BYOI providers. */
  'providers.manage': ['owner', 'admin'],
  /** View provider config. */
  'providers.view': ['owner', 'admin', 'member', 'viewer'],
  /** Create / manage sessions; run agents. */
  'sessions.manage': ['owner', 'admin', 'member'],
  /** View sessions / agents. */
  'sessions.view': ['owner', 'admin', 'member', 'viewer'],
  /** View logs / traces / metrics. */
  'observability.view': ['owner', 'admin', 'member', 'viewer'],
  /** Configure webhooks. */
  'webhooks.manage': ['owner', 'admin'],
  /**
   * Beyond the spec's table (it does not show knowledge or MCP routes): what agents are given to
   * work with, read by those who run agents, changed by admins, as providers and webhooks are.
   */
  'agentResources.view': ['owner', 'admin', 'member'],
  'agentResources.manage': ['owner', 'admin'],
  /** Read the audit log: not a row of the spec's table; the feature gives it to owners and admins. */
  'audit.view': ['owner', 'admin'],
} as const satisfies Record<string, readonly Role[]>;

export type Permission = keyof typeof PERMISSIONS;

export function roleHolds(role: Role, permission: Permission): boolean {
  return (PERMISSIONS[permission] as readonly Role[]).includes(role);
}

/**
 * The role a check uses: the member's own, except that the only person of an organization is
 * its owner for every check (the spec: "a single-person organization is owner for every check").
 */
export function effectiveRole(role: Role, acceptedMembers: number): Role {
  return acceptedMembers <= 1 ? 'owner' : role;
}
