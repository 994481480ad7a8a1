import {
  EMBEDDED_ISSUER,
  addMember,
  createOrganization,
  createSignInLink,
  upsertUser,
  type Clock,
  type Pool,
  type Role,
} from '../../common/src/index.js';
import { Browser } from './browser.js';

export interface SignedInPerson {
  userId: string;
  browser: Browser;
}

export interface TestOrganization {
  organizationId: string;
  owner: SignedInPerson & { memberId: string };
  /** Members by role, each signed in, who accepted their invites over HTTP. */
  members: Partial<Record<Exclude<Role, 'owner'>, SignedInPerson & { memberId: string }>>;
}

/**
 * People of the management plane for tests: users who sign in with one-time links (embedded
 * mode's sign-in, over HTTP with real cookies) and organizations whose members were invited and
 * accepted through the team routes.
 */
export function managementPeople(deps: { pool: Pool; clock: Clock; baseUrl: string }) {
  let serial = 0;

  async function signIn(userId: string): Promise<Browser> {
    const browser = new Browser(deps.baseUrl);
    const token = await createSignInLink(deps.pool, userId, 60_000, deps.clock.now());
    const signedIn = await browser.get(`/api/auth/link?token=${token}`);
    if (signedIn.status !== 200) throw new Error(`sign-in link: ${signedIn.status} ${JSON.stringify(signedIn.body)}`);
    await browser.loadCsrfToken();
    return browser;
  }

  async function person(name: string): Promise<SignedInPerson> {
    const user = await upsertUser(deps.pool, { issuer: EMBEDDED_ISSUER, subject: `${name}-${++serial}`, name }, deps.clock.now());
    return { userId: user.id, browser: await signIn(user.id) };
  }

  async function organization(roles: Exclude<Role, 'owner'>[] = []): Promise<TestOrganization> {
    const owner = await person('owner');
    const org = await createOrganization(deps.pool, `org-${serial}`);
    const ownerMember = await addMember(deps.pool, { organizationId: org.id, userId: owner.userId, role: 'owner' }, deps.clock.now());
    const switched = await owner.browser.put('/api/me/organization', { organizationId: org.id });
    if (switched.status !== 200) throw new Error(`switch: ${switched.status} ${JSON.stringify(switched.body)}`);
    const members: TestOrganization['members'] = {};
    for (const role of roles) {
      const someone = await person(role);
      const invite = await owner.browser.post('/api/team', { userId: someone.userId, role });
      if (invite.status !== 201) throw new Error(`invite: ${invite.status} ${JSON.stringify(invite.body)}`);
      const accepted = await someone.browser.post(`/api/invites/${invite.body.id}/accept`);
      if (accepted.status !== 200) throw new Error(`accept: ${accepted.status} ${JSON.stringify(accepted.body)}`);
      members[role] = { ...someone, memberId: invite.body.id };
    }
    return { organizationId: org.id, owner: { ...owner, memberId: ownerMember.id }, members };
  }

  return { signIn, person, organization };
}

/**
 * Which test file holds the role × route table of a permission-checked `/api` route: the team's
 * and the approvals' routes are in test/integration/permissions.test.ts, every other one in
 * test/integration/management-settings.test.ts. Each file checks that it covers exactly its own,
 * so a new route fails one of them until its cases are written.
 */
export const PERMISSIONS_TEST_PREFIXES = ['/api/team', '/api/approvals'];

export function permissionTableOf(path: string): 'permissions' | 'management-settings' {
  return PERMISSIONS_TEST_PREFIXES.some((prefix) => path === prefix || path.startsWith(`${prefix}/`)) ? 'permissions' : 'management-settings';
}
