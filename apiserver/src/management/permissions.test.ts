import { ROLES, type Role } from '@berth/common';
import { describe, expect, it } from 'vitest';
import { PERMISSIONS, effectiveRole, roleHolds, type Permission } from './permissions.js';

/** The spec's table (Roles, management plane), row by row as written there: owner, admin, member, viewer. */
const SPEC_TABLE: [row: string, permissions: Permission[], cells: [owner: boolean, admin: boolean, member: boolean, viewer: boolean]][] = [
  ['Delete organization; transfer ownership', ['organization.delete', 'ownership.transfer'], [true, false, false, false]],
  ['Update org settings', ['organization.update'], [true, true, false, false]],
  ['Invite, change roles, remove members', ['team.manage'], [true, true, false, false]],
  ['View team', ['team.view'], [true, true, true, true]],
  ['Create / revoke API keys', ['keys.manage'], [true, true, false, false]],
  ['View keys (prefix only)', ['keys.view'], [true, true, true, true]],
  ['Change plan / set budgets', ['billing.manage'], [true, true, false, false]],
  ['View billing and usage', ['billing.view'], [true, true, true, true]],
  ['Create / update secrets', ['secrets.write'], [true, true, true, false]],
  ['Delete secrets', ['secrets.delete'], [true, true, false, false]],
  ['View secret names', ['secrets.view'], [true, true, true, true]],
  ['Configure BYOI providers', ['providers.manage'], [true, true, false, false]],
  ['View provider config', ['providers.view'], [true, true, true, true]],
  ['Create / manage sessions; run agents', ['sessions.manage'], [true, true, true, false]],
  ['View sessions / agents', ['sessions.view'], [true, true, true, true]],
  ['View logs / traces / metrics', ['observability.view'], [true, true, true, true]],
  ['Configure webhooks', ['webhooks.manage'], [true, true, false, false]],
];
/** Permissions the spec's table has no row for, with the cells this install gives them. */
const BEYOND_THE_TABLE: typeof SPEC_TABLE = [['Read the audit log', ['audit.view'], [true, true, false, false]]];

const cells = [...SPEC_TABLE, ...BEYOND_THE_TABLE].flatMap(([row, permissions, allowed]) =>
  permissions.flatMap((permission) => ROLES.map((role, column) => ({ row, permission, role, allowed: allowed[column]! }))),
);

describe("the spec's permission table", () => {
  it('names every permission of PERMISSIONS once', () => {
    expect([...SPEC_TABLE, ...BEYOND_THE_TABLE].flatMap(([, permissions]) => permissions).sort()).toEqual(Object.keys(PERMISSIONS).sort());
  });

  it.each(cells)('$row: $role → $allowed ($permission)', ({ permission, role, allowed }) => {
    expect(roleHolds(role, permission)).toBe(allowed);
  });
});

describe('a single-person organization', () => {
  it.each(ROLES)('is owner for every check, whatever the row says (%s)', (role: Role) => {
    expect(effectiveRole(role, 1)).toBe('owner');
    for (const permission of Object.keys(PERMISSIONS) as Permission[]) expect(roleHolds(effectiveRole(role, 1), permission)).toBe(true);
  });

  it.each(ROLES)('is the role itself with two people or more (%s)', (role: Role) => {
    expect(effectiveRole(role, 2)).toBe(role);
  });
});
