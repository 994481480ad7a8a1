import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INVITE_LIFETIME_MS, ManualClock } from '../../common/src/index.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { IdleProvider } from '../helpers/fake-providers.js';
import { managementPeople } from '../helpers/management.js';

/**
 * The team routes over HTTP with real cookies, against a real PostgreSQL database and a manual
 * clock: the five server rules, invites (acceptance, expiry after 7 days), removal taking effect
 * on the next request, ownership transfer, and two organizations that never see each other.
 * People sign in with one-time links (the embedded mode's sign-in); the OpenID Connect flow has
 * its own file.
 */
let api: TestApi;
const clock = new ManualClock('2026-11-01T09:00:00Z');
type People = ReturnType<typeof managementPeople>;

let signIn: People['signIn'];
let person: People['person'];
let organization: People['organization'];

beforeAll(async () => {
  api = await startTestApi({ clock, providers: new ProviderRegistry([new IdleProvider()], 'idle') });
  ({ signIn, person, organization } = managementPeople({ pool: api.pool, clock, baseUrl: api.baseUrl }));
});
afterAll(() => api?.close());

describe('team routes', () => {
  it('invites, lists with pending invites, accepts, and answers in the shapes of the spec', async () => {
    const { owner } = await organization();
    const bob = await person('bob');
    const invite = await owner.browser.post('/api/team', { userId: bob.userId });
    expect(invite.status).toBe(201);
    expect(invite.body).toEqual({
      id: expect.stringMatching(/^mem_/),
      userId: bob.userId,
      role: 'member',
      invitedAt: clock.now().toISOString(),
      pending: true,
      expiresAt: new Date(clock.now().getTime() + INVITE_LIFETIME_MS).toISOString(),
    });
    const team = await owner.browser.get('/api/team');
    expect(team.status).toBe(200);
    expect(team.body.currentUserId).toBe(owner.userId);
    expect(team.body.currentRole).toBe('owner');
    expect(team.body.members.map((member: { userId: string; role: string; pending: boolean }) => [member.userId, member.role, member.pending])).toEqual([
      [owner.userId, 'owner', false],
      [bob.userId, 'member', true],
    ]);

    // Pending: no access yet, and the invite is listed for Bob.
    expect((await bob.browser.get('/api/team')).body.error.code).toBe('forbidden');
    const invites = await bob.browser.get('/api/invites');
    expect(invites.body.data).toEqual([expect.objectContaining({ id: invite.body.id, role: 'member' })]);
    const accepted = await bob.browser.post(`/api/invites/${invite.body.id}/accept`);
    expect(accepted.status).toBe(200);
    expect(accepted.body).toMatchObject({ id: invite.body.id, pending: false, acceptedAt: clock.now().toISOString(), expiresAt: null });
    const asBob = await bob.browser.get('/api/team');
    expect(asBob.status).toBe(200);
    expect(asBob.body.currentRole).toBe('member');
  });

  it('rule 1: the owner cannot be changed or removed; after a transfer they can leave as admin', async () => {
    const { owner, members } = await organization(['admin']);
    for (const browser of [owner.browser, members.admin!.browser]) {
      const patch = await browser.patch(`/api/team/${owner.memberId}`, { role: 'viewer' });
      expect([patch.status, patch.body.error.code]).toEqual([403, 'forbidden']);
      const remove = await browser.delete(`/api/team/${owner.memberId}`);
      expect([remove.status, remove.body.error.code]).toEqual([403, 'forbidden']);
    }
    expect((await owner.browser.post('/api/team/transfer', { newOwnerId: members.admin!.memberId })).body).toEqual({ ok: true });
    const team = await owner.browser.get('/api/team');
    expect(team.body.currentRole).toBe('admin');
    expect(team.body.members[0]).toMatchObject({ userId: members.admin!.userId, role: 'owner' });
    expect((await owner.browser.delete(`/api/team/${owner.memberId}`)).body).toEqual({ ok: true });
    expect((await owner.browser.get('/api/team')).status).toBe(403);
  });

  it('rule 2: an admin removes members and viewers, not admins; the owner removes admins', async () => {
    const { owner, members } = await organization(['admin', 'member', 'viewer']);
    const other = await person('admin2');
    const invite = await owner.browser.post('/api/team', { userId: other.userId, role: 'admin' });
    await other.browser.post(`/api/invites/${invite.body.id}/accept`);
    const admin = members.admin!.browser;
    const refused = await admin.delete(`/api/team/${invite.body.id}`);
    expect([refused.status, refused.body.error.code, refused.body.error.details.reason]).toEqual([403, 'forbidden', 'admin']);
    // Nor demote them.
    const demote = await admin.patch(`/api/team/${invite.body.id}`, { role: 'viewer' });
    expect([demote.status, demote.body.error.details.reason]).toEqual([403, 'admin']);
    expect((await admin.delete(`/api/team/${members.member!.memberId}`)).body).toEqual({ ok: true });
    expect((await admin.delete(`/api/team/${members.viewer!.memberId}`)).body).toEqual({ ok: true });
    expect((await owner.browser.delete(`/api/team/${invite.body.id}`)).body).toEqual({ ok: true });
    // An admin may leave.
    expect((await admin.delete(`/api/team/${members.admin!.memberId}`)).body).toEqual({ ok: true });
    expect((await admin.get('/api/team')).status).toBe(403);
    expect((await owner.browser.get('/api/team')).body.members.map((member: { role: string }) => member.role)).toEqual(['owner']);
  });

  it('rule 3: PATCH to owner is 400 invalid_role, and so is an invite as owner', async () => {
    const { owner, members } = await organization(['member']);
    const patch = await owner.browser.patch(`/api/team/${members.member!.memberId}`, { role: 'owner' });
    expect([patch.status, patch.body.error.code]).toEqual([400, 'invalid_role']);
    const someone = await person('x');
    const invite = await owner.browser.post('/api/team', { userId: someone.userId, role: 'owner' });
    expect([invite.status, invite.body.error.code]).toEqual([400, 'invalid_role']);
    // The role did not change.
    expect((await members.member!.browser.get('/api/team')).body.currentRole).toBe('member');
  });

  it('rule 4: inviting a pending or current member is 409 already_member', async () => {
    const { owner, members } = await organization(['viewer']);
    const current = await owner.browser.post('/api/team', { userId: members.viewer!.userId, role: 'admin' });
    expect([current.status, current.body.error.code]).toEqual([409, 'already_member']);
    const someone = await person('pending');
    expect((await owner.browser.post('/api/team', { userId: someone.userId })).status).toBe(201);
    const again = await owner.browser.post('/api/team', { userId: someone.userId });
    expect([again.status, again.body.error.code]).toEqual([409, 'already_member']);
    const self = await owner.browser.post('/api/team', { userId: owner.userId });
    expect([self.status, self.body.error.code]).toEqual([409, 'already_member']);
  });

  it('rule 5: transfer to a pending member is 400 transfer_to_pending, and ownership stays', async () => {
    const { owner } = await organization(['member']);
    const someone = await person('pending');
    const invite = await owner.browser.post('/api/team', { userId: someone.userId, role: 'admin' });
    const transfer = await owner.browser.post('/api/team/transfer', { newOwnerId: invite.body.id });
    expect([transfer.status, transfer.body.error.code]).toEqual([400, 'transfer_to_pending']);
    expect((await owner.browser.get('/api/team')).body.currentRole).toBe('owner');
  });

  it('invites expire after 7 days: not listed, not acceptable, and the user can be invited again', async () => {
    const { owner } = await organization(['member']);
    const late = await person('late');
    const invite = await owner.browser.post('/api/team', { userId: late.userId, role: 'viewer' });
    clock.advance(INVITE_LIFETIME_MS - 1000);
    expect((await late.browser.get('/api/invites')).body.data).toHaveLength(1);
    clock.advance(2000);
    // Sign-ins last 7 days too: both sign in again.
    late.browser = await signIn(late.userId);
    owner.browser = await signIn(owner.userId);
    expect((await late.browser.get('/api/invites')).body.data).toEqual([]);
    expect((await owner.browser.get('/api/team')).body.members.map((member: { userId: string }) => member.userId)).not.toContain(late.userId);
    const accept = await late.browser.post(`/api/invites/${invite.body.id}/accept`);
    expect([accept.status, accept.body.error.code]).toEqual([404, 'not_found']);
    expect((await late.browser.get('/api/team')).status).toBe(403);
    const again = await owner.browser.post('/api/team', { userId: late.userId, role: 'viewer' });
    expect(again.status).toBe(201);
    expect((await late.browser.post(`/api/invites/${again.body.id}/accept`)).status).toBe(200);
  });

  it("a removed member's next request fails at once, and a role change applies to the next request", async () => {
    const { owner, members } = await organization(['admin', 'member']);
    const member = members.member!;
    expect((await member.browser.get('/api/team')).status).toBe(200);
    // Promoted: the next request may manage the team.
    await owner.browser.patch(`/api/team/${member.memberId}`, { role: 'admin' });
    const someone = await person('y');
    expect((await member.browser.post('/api/team', { userId: someone.userId })).status).toBe(201);
    await owner.browser.delete(`/api/team/${member.memberId}`);
    const after = await member.browser.get('/api/team');
    expect([after.status, after.body.error.code, after.body.error.details.reason]).toEqual([403, 'forbidden', 'not_a_member']);
  });

  it('two organizations never see or change each other\'s members', async () => {
    const a = await organization(['member']);
    const b = await organization(['member']);
    const teamA = await a.owner.browser.get('/api/team');
    const teamB = await b.owner.browser.get('/api/team');
    const idsA = teamA.body.members.map((member: { id: string }) => member.id);
    const idsB = teamB.body.members.map((member: { id: string }) => member.id);
    expect(idsA.filter((id: string) => idsB.includes(id))).toEqual([]);
    // A's owner addresses B's member by id: not found in A, and nothing changes in B.
    const patch = await a.owner.browser.patch(`/api/team/${b.members.member!.memberId}`, { role: 'viewer' });
    expect([patch.status, patch.body.error.code]).toEqual([404, 'not_found']);
    expect((await a.owner.browser.delete(`/api/team/${b.members.member!.memberId}`)).status).toBe(404);
    expect((await a.owner.browser.post('/api/team/transfer', { newOwnerId: b.members.member!.memberId })).status).toBe(404);
    // Switching to an organization one is not a member of is refused.
    const sw = await a.owner.browser.put('/api/me/organization', { organizationId: b.organizationId });
    expect([sw.status, sw.body.error.code]).toEqual([403, 'forbidden']);
    expect((await b.owner.browser.get('/api/team')).body).toEqual(teamB.body);
  });
});
