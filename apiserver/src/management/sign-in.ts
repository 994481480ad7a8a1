import {
  EMBEDDED_ISSUER,
  addMember,
  consumeSignInLink,
  countLiveSignInSessions,
  createOrganization,
  createSignInLink,
  createSignInSession,
  findOwner,
  findOwnerlessOrganization,
  listMemberships,
  pruneSignInSessions,
  upsertUser,
  withTransaction,
  type Clock,
  type Logger,
  type Pool,
  type Queryable,
  type SignInSession,
  type User,
} from '@berth/common';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { OidcClient } from './oidc.js';

/** A sign-in lasts this long; sign-out or revocation ends it earlier. */
export const SIGN_IN_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000;
/** One-time links of embedded mode are good for this long, and once. */
export const SIGN_IN_LINK_LIFETIME_MS = 24 * 60 * 60 * 1000;

/**
 * What happens when someone signs in who belongs to no organization:
 * - `invite` (default): the first person to sign in to the install becomes owner of its first
 *   organization (created if there is none); anyone else waits for an invite.
 * - `organization`: the same first sign-in, and every later person without a membership gets a
 *   new organization of their own, as its owner (self-service installs).
 */
export type SignupPolicy = 'invite' | 'organization';

const FIRST_OWNER_LOCK = 7_261_998_017;

export interface SignInService {
  oidc: OidcClient | undefined;
  /** Records a user an identity provider vouched for, and signs them in. */
  signInWithIdentity(identity: { issuer: string; subject: string; email?: string | null; name?: string | null }): Promise<{ token: string; session: SignInSession; user: User }>;
  /** Uses a one-time link; `undefined` when it is unknown, used or expired. */
  signInWithLink(token: string): Promise<{ token: string; session: SignInSession } | undefined>;
  /** Counts a sign-in attempt by method and result (`berth_sign_ins_total`). */
  count(method: 'oidc' | 'link', result: 'success' | 'failure'): void;
}

export function createSignInService(deps: {
  pool: Pool;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  oidc: OidcClient | undefined;
  signup: SignupPolicy;
}): SignInService {
  const signIns = new Counter({
    name: 'berth_sign_ins_total',
    help: 'Sign-ins to the management plane by method (oidc, link) and result (success, failure)',
    labelNames: ['method', 'result'],
    registers: [deps.metrics],
  });
  new Gauge({
    name: 'berth_sign_in_sessions_active',
    help: 'Sign-in sessions that are neither expired nor revoked (all replicas: read from the database at scrape)',
    registers: [deps.metrics],
    async collect() {
      this.set(await countLiveSignInSessions(deps.pool, deps.clock.now()));
    },
  });

  /** The organization a new sign-in acts in: the user's oldest membership, or one the signup policy gives them. */
  async function organizationFor(user: User): Promise<string | null> {
    const memberships = await listMemberships(deps.pool, user.id);
    if (memberships[0]) return memberships[0].organizationId;
    return withTransaction(deps.pool, async (tx) => {
      // One first owner, however many people sign in at once.
      await tx.query('SELECT pg_advisory_xact_lock($1)', [FIRST_OWNER_LOCK]);
      const again = await listMemberships(tx, user.id);
      if (again[0]) return again[0].organizationId;
      const now = deps.clock.now();
      const ownerless = await findOwnerlessOrganization(tx);
      const { rows } = await tx.query<{ count: string }>('SELECT count(*) FROM organizations');
      const firstOfInstall = ownerless ?? (Number(rows[0]!.count) === 0 ? await createOrganization(tx, 'default') : undefined);
      if (firstOfInstall) {
        await addMember(tx, { organizationId: firstOfInstall.id, userId: user.id, role: 'owner' }, now);
        deps.log.info({ organizationId: firstOfInstall.id, userId: user.id }, 'first sign-in: owner of the organization');
        return firstOfInstall.id;
      }
      if (deps.signup !== 'organization') return null;
      const organization = await createOrganization(tx, user.email ?? user.name ?? user.id);
      await addMember(tx, { organizationId: organization.id, userId: user.id, role: 'owner' }, now);
      deps.log.info({ organizationId: organization.id, userId: user.id }, 'new organization for a first sign-in');
      return organization.id;
    });
  }

  async function startSession(user: User) {
    await pruneSignInSessions(deps.pool, user.id, deps.clock.now());
    const organizationId = await organizationFor(user);
    return createSignInSession(deps.pool, { userId: user.id, organizationId, lifetimeMs: SIGN_IN_LIFETIME_MS }, deps.clock.now());
  }

  return {
    oidc: deps.oidc,
    async signInWithIdentity(identity) {
      const user = await upsertUser(deps.pool, identity, deps.clock.now());
      return { ...(await startSession(user)), user };
    },
    async signInWithLink(token) {
      const userId = await consumeSignInLink(deps.pool, token, deps.clock.now());
      if (!userId) return undefined;
      const { rows } = await deps.pool.query<User>('UPDATE users SET last_sign_in_at = $2 WHERE id = $1 RETURNING id, issuer, subject, email, name', [
        userId,
        deps.clock.now(),
      ]);
      return startSession(rows[0]!);
    },
    count(method, result) {
      signIns.inc({ method, result });
    },
  };
}

/**
 * Embedded mode's first owner: a user of the issuer `berth:embedded` who owns the organization
 * when it has no owner yet. Returns a one-time sign-in link token for that owner (the current
 * owner when the organization has one and it is this user; see `berth admin login`).
 */
export async function embeddedOwnerLink(db: Pool, organizationId: string, now: Date): Promise<{ token: string; userId: string }> {
  return withTransaction(db, async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [FIRST_OWNER_LOCK]);
    const owner = await findOwner(tx, organizationId);
    const userId = owner?.userId ?? (await claimForEmbeddedOwner(tx, organizationId, now));
    return { token: await createSignInLink(tx, userId, SIGN_IN_LINK_LIFETIME_MS, now), userId };
  });
}

async function claimForEmbeddedOwner(tx: Queryable, organizationId: string, now: Date): Promise<string> {
  const user = await upsertUser(tx, { issuer: EMBEDDED_ISSUER, subject: 'owner', name: 'Owner' }, now);
  await addMember(tx, { organizationId, userId: user.id, role: 'owner' }, now);
  return user.id;
}
