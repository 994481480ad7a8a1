import { expect } from 'vitest';
import { EMBEDDED_ISSUER, addMember, createOrganization, createSignInLink, upsertUser, type Clock, type Role } from '../../common/src/index.js';
import type { TestApi } from './app.js';
import { Browser } from './browser.js';

export interface Person {
  userId: string;
  browser: Browser;
}

/**
 * People of the management plane for in-process tests: users signed in with one-time links (the
 * embedded mode's sign-in) in browsers of their own, and organizations with an owner and members
 * of given roles who accepted their invites over HTTP.
 */
export function people(api: TestApi, clock: Clock) {
  let serial = 0;

  /** A browser signed in as the user, with a one-time link. */
  async function signIn(userId: string): Promise<Browser> {
    const browser = new Browser(api.baseUrl);
    const token = await createSignInLink(api.pool, userId, 60_000, clock.now());
    const signedIn = await browser.get(`/api/auth/link?token=${token}`);
    expect(signedIn.status).toBe(200);
    await browser.loadCsrfToken();
    return browser;
  }

  /** A person who has signed in once (so they have a user id), signed in now in a browser of their own. */
  async function person(name: string): Promise<Person> {
    const user = await upsertUser(api.pool, { issuer: EMBEDDED_ISSUER, subject: `${name}-${++serial}`, name }, clock.now());
    return { userId: user.id, browser: await signIn(user.id) };
  }

  /** An organization with its owner, and members of the given roles who accepted their invites. */
  async function organization(roles: Exclude<Role, 'owner'>[] = []) {
    const owner = await person('owner');
    const org = await createOrganization(api.pool, `org-${serial}`);
    await addMember(api.pool, { organizationId: org.id, userId: owner.userId, role: 'owner' }, clock.now());
    await owner.browser.put('/api/me/organization', { organizationId: org.id });
    const members: Record<string, Person & { memberId: string }> = {};
    for (const role of roles) {
      const someone = await person(role);
      const invite = await owner.browser.post('/api/team', { userId: someone.userId, role });
      expect(invite.status).toBe(201);
      expect((await someone.browser.post(`/api/invites/${invite.body.id}/accept`)).status).toBe(200);
      members[role] = { ...someone, memberId: invite.body.id };
    }
    const team = await owner.browser.get('/api/team');
    const ownerMemberId = team.body.members.find((member: { role: string }) => member.role === 'owner').id;
    return { org, owner: { ...owner, memberId: ownerMemberId as string }, members };
  }

  return { signIn, person, organization };
}
