import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, ROLES, insertApproval, insertTask, newId, type Role } from '../../common/src/index.js';
import { roleHolds, type Permission } from '../../apiserver/src/management/permissions.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import type { BrowserResponse } from '../helpers/browser.js';
import { IdleProvider } from '../helpers/fake-providers.js';
import { managementPeople, permissionTableOf, type TestOrganization } from '../helpers/management.js';

/**
 * The permission table over HTTP: every `/api` route that needs a permission, called by each of
 * the four roles in an organization of four people (owner, admin, member, viewer) with real
 * cookies and CSRF tokens. A role the spec's table allows gets the route's answer; any other gets
 * 403 `forbidden` with `details.reason: "role"`, and nothing changes.
 */
let api: TestApi;
const clock = new ManualClock('2026-11-01T09:00:00Z');
let people: ReturnType<typeof managementPeople>;

beforeAll(async () => {
  api = await startTestApi({ clock, providers: new ProviderRegistry([new IdleProvider()], 'idle') });
  people = managementPeople({ pool: api.pool, clock, baseUrl: api.baseUrl });
});
afterAll(() => api?.close());

interface RouteCase {
  permission: Permission;
  /** The answer when allowed. */
  status: number;
  /** Calls the route as `caller` on a fresh target of the organization. */
  call(org: TestOrganization, caller: TestOrganization['owner']): Promise<BrowserResponse>;
}

/** A live tool call of the organization that waits for a decision, as a runner records it. */
async function pendingApproval(org: TestOrganization): Promise<string> {
  const task = await insertTask(api.pool, {
    id: newId('task', clock.now()),
    organizationId: org.organizationId,
    mode: 'live',
    sessionId: newId('ses', clock.now()),
    agentId: newId('agt', clock.now()),
    input: 'needs a decision',
  });
  const approval = await insertApproval(api.pool, {
    id: newId('apr', clock.now()),
    organizationId: org.organizationId,
    mode: 'live',
    sessionId: task.sessionId,
    agentId: task.agentId,
    taskId: task.id,
    toolCallId: 'call_1',
    tool: 'exec',
    preview: { language: 'bash', code: 'echo hi' },
    rule: 0,
    expiresAt: new Date(clock.now().getTime() + 3_600_000),
  });
  return approval.id;
}

/** Every permission-checked /api route, by "METHOD path" as the route table names it. */
const ROUTES: Record<string, RouteCase> = {
  'GET /api/team': { permission: 'team.view', status: 200, call: (_org, caller) => caller.browser.get('/api/team') },
  'POST /api/team': {
    permission: 'team.manage',
    status: 201,
    call: async (_org, caller) => caller.browser.post('/api/team', { userId: (await people.person('invitee')).userId, role: 'viewer' }),
  },
  'PATCH /api/team/:memberId': {
    permission: 'team.manage',
    status: 200,
    call: (org, caller) => caller.browser.patch(`/api/team/${org.members.viewer!.memberId}`, { role: 'member' }),
  },
  'DELETE /api/team/:memberId': {
    permission: 'team.manage',
    status: 200,
    call: (org, caller) => caller.browser.delete(`/api/team/${org.members.viewer!.memberId}`),
  },
  'POST /api/team/transfer': {
    permission: 'ownership.transfer',
    status: 200,
    call: (org, caller) => caller.browser.post('/api/team/transfer', { newOwnerId: org.members.member!.memberId }),
  },
  'GET /api/approvals': { permission: 'sessions.view', status: 200, call: (_org, caller) => caller.browser.get('/api/approvals') },
  'GET /api/approvals/:id': {
    permission: 'sessions.view',
    status: 200,
    call: async (org, caller) => caller.browser.get(`/api/approvals/${await pendingApproval(org)}`),
  },
  'POST /api/approvals/:id/approve': {
    permission: 'sessions.manage',
    status: 200,
    call: async (org, caller) => caller.browser.post(`/api/approvals/${await pendingApproval(org)}/approve`, { reason: 'fine' }),
  },
  'POST /api/approvals/:id/deny': {
    permission: 'sessions.manage',
    status: 200,
    call: async (org, caller) => caller.browser.post(`/api/approvals/${await pendingApproval(org)}/deny`, { reason: 'not now' }),
  },
};

describe('the permission table on every /api route', () => {
  it('covers every route of the team and approvals that names a permission (the others: management-settings.test.ts)', () => {
    const checked = api.app.managementRoutes
      .list()
      .filter((route) => route.permission && route.permission !== 'signed-in' && permissionTableOf(route.path) === 'permissions')
      .map((route) => `${route.method.toUpperCase()} ${route.path}`);
    expect(checked.sort()).toEqual(Object.keys(ROUTES).sort());
    for (const route of api.app.managementRoutes.list()) {
      const key = `${route.method.toUpperCase()} ${route.path}`;
      if (ROUTES[key]) expect(route.permission, key).toBe(ROUTES[key]!.permission);
    }
  });

  const cells = Object.entries(ROUTES).flatMap(([route, spec]) =>
    ROLES.map((role) => ({ route, role, spec, allowed: roleHolds(role, spec.permission) })),
  );

  it.each(cells)('$route as $role: allowed=$allowed', async ({ role, spec, allowed }) => {
    const org = await people.organization(['admin', 'member', 'viewer']);
    const caller = role === 'owner' ? org.owner : org.members[role as Exclude<Role, 'owner'>]!;
    const before = (await org.owner.browser.get('/api/team')).body;
    const response = await spec.call(org, caller);
    if (allowed) {
      expect(response.status, JSON.stringify(response.body)).toBe(spec.status);
    } else {
      expect([response.status, response.body.error.code, response.body.error.details]).toEqual([
        403,
        'forbidden',
        expect.objectContaining({ reason: 'role', permission: spec.permission, role }),
      ]);
      expect((await org.owner.browser.get('/api/team')).body).toEqual(before);
    }
  });

  it.each(Object.entries(ROUTES))('%s is open to the only person of an organization', async (_route, spec) => {
    const alone = await people.organization();
    // The routes' targets are members; one who is invited but not accepted keeps the organization single-person.
    const viewerInvite = await alone.owner.browser.post('/api/team', { userId: (await people.person('v')).userId, role: 'viewer' });
    const target = { ...alone.owner, memberId: viewerInvite.body.id };
    const org: TestOrganization = { ...alone, members: { viewer: target, member: target } };
    const team = await alone.owner.browser.get('/api/team');
    expect(team.body.currentRole).toBe('owner');
    const response = await spec.call(org, alone.owner);
    // Allowed: the route's own answer (a transfer to a pending member is rule 5, past the permission check).
    expect(response.status === 403 ? response.body.error : 'allowed').toBe('allowed');
  });
});
