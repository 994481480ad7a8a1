import { createHash, randomBytes } from 'node:crypto';
import type { Queryable } from './db/index.js';
import { newId } from './ids.js';

/** Roles of the management plane, strongest first. */
export const ROLES = ['owner', 'admin', 'member', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/** An invite that was not accepted within this time has expired. */
export const INVITE_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000;

/** The issuer of users who sign in with a one-time link of embedded mode, not through an identity provider. */
export const EMBEDDED_ISSUER = 'berth:embedded';

export interface User {
  id: string;
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
}

export interface Member {
  id: string;
  organizationId: string;
  userId: string;
  role: Role;
  invitedAt: string;
  acceptedAt: string | null;
  /** When a pending invite stops being acceptable; null once accepted. */
  expiresAt: string | null;
}

interface MemberRow {
  id: string;
  organization_id: string;
  user_id: string;
  role: Role;
  invited_at: Date;
  accepted_at: Date | null;
}

const MEMBER_COLUMNS = 'id, organization_id, user_id, role, invited_at, accepted_at';

function toMember(row: MemberRow): Member {
  return {
    id: row.id,
    organizationId: row.organization_id,
    userId: row.user_id,
    role: row.role,
    invitedAt: row.invited_at.toISOString(),
    acceptedAt: row.accepted_at?.toISOString() ?? null,
    expiresAt: row.accepted_at ? null : new Date(row.invited_at.getTime() + INVITE_LIFETIME_MS).toISOString(),
  };
}

/** Pending invites older than the invite lifetime count as gone everywhere. */
const LIVE = `(accepted_at IS NOT NULL OR invited_at > $NOW::timestamptz - interval '7 days')`;
const live = (nowParam: string) => LIVE.replace('$NOW', nowParam);

function tokenHash(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

// ---- users ----

/** The user an identity provider names, created at their first sign-in; name and email follow the provider's latest claims. */
export async function upsertUser(
  db: Queryable,
  input: { issuer: string; subject: string; email?: string | null; name?: string | null },
  now: Date,
): Promise<User> {
  const { rows } = await db.query<User>(
    `INSERT INTO users (id, issuer, subject, email, name, created_at, last_sign_in_at) VALUES ($1, $2, $3, $4, $5, $6, $6)
     ON CONFLICT (issuer, subject) DO UPDATE SET email = coalesce(EXCLUDED.email, users.email), name = coalesce(EXCLUDED.name, users.name), last_sign_in_at = $6
     RETURNING id, issuer, subject, email, name`,
    [newId('usr', now), input.issuer, input.subject, input.email ?? null, input.name ?? null, now],
  );
  return rows[0]!;
}

export async function findUser(db: Queryable, id: string): Promise<User | undefined> {
  const { rows } = await db.query<User>('SELECT id, issuer, subject, email, name FROM users WHERE id = $1', [id]);
  return rows[0];
}

// ---- members ----

/** Adds an accepted member (the owner of a new organization, or a role given by the install's admin). */
export async function addMember(db: Queryable, input: { organizationId: string; userId: string; role: Role }, now: Date): Promise<Member> {
  const { rows } = await db.query<MemberRow>(
    `INSERT INTO organization_members (id, organization_id, user_id, role, invited_at, accepted_at) VALUES ($1, $2, $3, $4, $5, $5)
     RETURNING ${MEMBER_COLUMNS}`,
    [newId('mem', now), input.organizationId, input.userId, input.role, now],
  );
  return toMember(rows[0]!);
}

/**
 * A pending invite. An expired invite of the same user is replaced; a live invite or a
 * membership makes this return `undefined` (the caller answers `already_member`).
 */
export async function inviteMember(
  db: Queryable,
  input: { organizationId: string; userId: string; role: Exclude<Role, 'owner'>; invitedBy: string },
  now: Date,
): Promise<Member | undefined> {
  await db.query(
    `DELETE FROM organization_members WHERE organization_id = $1 AND user_id = $2 AND NOT ${live('$3')}`,
    [input.organizationId, input.userId, now],
  );
  const { rows } = await db.query<MemberRow>(
    `INSERT INTO organization_members (id, organization_id, user_id, role, invited_at, invited_by) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (organization_id, user_id) DO NOTHING RETURNING ${MEMBER_COLUMNS}`,
    [newId('mem', now), input.organizationId, input.userId, input.role, now, input.invitedBy],
  );
  return rows[0] ? toMember(rows[0]) : undefined;
}

/** Members and live invites of an organization, owner first, then by time of invite. */
export async function listMembers(db: Queryable, organizationId: string, now: Date): Promise<Member[]> {
  const { rows } = await db.query<MemberRow>(
    `SELECT ${MEMBER_COLUMNS} FROM organization_members WHERE organization_id = $1 AND ${live('$2')}
     ORDER BY role = 'owner' DESC, invited_at, id`,
    [organizationId, now],
  );
  return rows.map(toMember);
}

/** One member or live invite of the organization; `forUpdate` locks the row in a transaction. */
export async function findMember(db: Queryable, organizationId: string, memberId: string, now: Date, forUpdate = false): Promise<Member | undefined> {
  const { rows } = await db.query<MemberRow>(
    `SELECT ${MEMBER_COLUMNS} FROM organization_members WHERE organization_id = $1 AND id = $2 AND ${live('$3')}${forUpdate ? ' FOR UPDATE' : ''}`,
    [organizationId, memberId, now],
  );
  return rows[0] ? toMember(rows[0]) : undefined;
}

/** The user's accepted membership of the organization: what every request is authorized by. */
export async function findMembership(db: Queryable, organizationId: string, userId: string): Promise<Member | undefined> {
  const { rows } = await db.query<MemberRow>(
    `SELECT ${MEMBER_COLUMNS} FROM organization_members WHERE organization_id = $1 AND user_id = $2 AND accepted_at IS NOT NULL`,
    [organizationId, userId],
  );
  return rows[0] ? toMember(rows[0]) : undefined;
}

/** How many people have accepted membership of the organization (a single-person organization is owner for every check). */
export async function countAcceptedMembers(db: Queryable, organizationId: string): Promise<number> {
  const { rows } = await db.query<{ count: string }>(
    'SELECT count(*) FROM organization_members WHERE organization_id = $1 AND accepted_at IS NOT NULL',
    [organizationId],
  );
  return Number(rows[0]!.count);
}

/** The user's accepted memberships, oldest first, with the organizations' names. */
export async function listMemberships(db: Queryable, userId: string): Promise<(Member & { organizationName: string })[]> {
  const { rows } = await db.query<MemberRow & { organization_name: string }>(
    `SELECT m.id, m.organization_id, m.user_id, m.role, m.invited_at, m.accepted_at, o.name AS organization_name
     FROM organization_members m JOIN organizations o ON o.id = m.organization_id
     WHERE m.user_id = $1 AND m.accepted_at IS NOT NULL ORDER BY m.accepted_at, m.id`,
    [userId],
  );
  return rows.map((row) => ({ ...toMember(row), organizationName: row.organization_name }));
}

/** The user's live invites, with the organizations' names. */
export async function listPendingInvites(db: Queryable, userId: string, now: Date): Promise<(Member & { organizationName: string })[]> {
  const { rows } = await db.query<MemberRow & { organization_name: string }>(
    `SELECT m.id, m.organization_id, m.user_id, m.role, m.invited_at, m.accepted_at, o.name AS organization_name
     FROM organization_members m JOIN organizations o ON o.id = m.organization_id
     WHERE m.user_id = $1 AND m.accepted_at IS NULL AND m.invited_at > $2::timestamptz - interval '7 days' ORDER BY m.invited_at, m.id`,
    [userId, now],
  );
  return rows.map((row) => ({ ...toMember(row), organizationName: row.organization_name }));
}

/** Accepts the user's live invite; `undefined` when there is none (never sent, accepted already, or expired). */
export async function acceptInvite(db: Queryable, memberId: string, userId: string, now: Date): Promise<Member | undefined> {
  const { rows } = await db.query<MemberRow>(
    `UPDATE organization_members SET accepted_at = $3
     WHERE id = $1 AND user_id = $2 AND accepted_at IS NULL AND invited_at > $3::timestamptz - interval '7 days'
     RETURNING ${MEMBER_COLUMNS}`,
    [memberId, userId, now],
  );
  return rows[0] ? toMember(rows[0]) : undefined;
}

export async function setMemberRole(db: Queryable, memberId: string, role: Role): Promise<void> {
  await db.query('UPDATE organization_members SET role = $2 WHERE id = $1', [memberId, role]);
}

export async function removeMember(db: Queryable, memberId: string): Promise<void> {
  await db.query('DELETE FROM organization_members WHERE id = $1', [memberId]);
}

/** Moves ownership in one transaction's statements: the owner becomes admin first, so that one owner exists at every commit. */
export async function transferOwnership(db: Queryable, organizationId: string, fromMemberId: string, toMemberId: string): Promise<void> {
  await db.query(`UPDATE organization_members SET role = 'admin' WHERE organization_id = $1 AND id = $2 AND role = 'owner'`, [organizationId, fromMemberId]);
  await db.query(`UPDATE organization_members SET role = 'owner' WHERE organization_id = $1 AND id = $2`, [organizationId, toMemberId]);
}

export async function findOwner(db: Queryable, organizationId: string): Promise<Member | undefined> {
  const { rows } = await db.query<MemberRow>(
    `SELECT ${MEMBER_COLUMNS} FROM organization_members WHERE organization_id = $1 AND role = 'owner'`,
    [organizationId],
  );
  return rows[0] ? toMember(rows[0]) : undefined;
}

// ---- sign-in sessions ----

export interface SignInSession {
  id: string;
  userId: string;
  organizationId: string | null;
  csrfToken: string;
  createdAt: string;
  expiresAt: string;
}

interface SignInSessionRow {
  id: string;
  user_id: string;
  organization_id: string | null;
  csrf_token: string;
  created_at: Date;
  expires_at: Date;
}

function toSignInSession(row: SignInSessionRow): SignInSession {
  return {
    id: row.id,
    userId: row.user_id,
    organizationId: row.organization_id,
    csrfToken: row.csrf_token,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
  };
}

const SESSION_COLUMNS = 'id, user_id, organization_id, csrf_token, created_at, expires_at';

/** A new sign-in session; the token goes into the cookie and is kept here only as a hash. */
export async function createSignInSession(
  db: Queryable,
  input: { userId: string; organizationId: string | null; lifetimeMs: number },
  now: Date,
): Promise<{ token: string; session: SignInSession }> {
  const token = randomBytes(32).toString('base64url');
  const { rows } = await db.query<SignInSessionRow>(
    `INSERT INTO sign_in_sessions (id, token_hash, user_id, organization_id, csrf_token, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${SESSION_COLUMNS}`,
    [newId('sis', now), tokenHash(token), input.userId, input.organizationId, randomBytes(24).toString('base64url'), now, new Date(now.getTime() + input.lifetimeMs)],
  );
  return { token, session: toSignInSession(rows[0]!) };
}

/** The live session of a cookie's token: not revoked, not expired. */
export async function findSignInSession(db: Queryable, token: string, now: Date): Promise<SignInSession | undefined> {
  const { rows } = await db.query<SignInSessionRow>(
    `SELECT ${SESSION_COLUMNS} FROM sign_in_sessions WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > $2`,
    [tokenHash(token), now],
  );
  return rows[0] ? toSignInSession(rows[0]) : undefined;
}

export async function setSignInSessionOrganization(db: Queryable, sessionId: string, organizationId: string): Promise<void> {
  await db.query('UPDATE sign_in_sessions SET organization_id = $2 WHERE id = $1', [sessionId, organizationId]);
}

export async function revokeSignInSession(db: Queryable, sessionId: string, now: Date): Promise<void> {
  await db.query('UPDATE sign_in_sessions SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1', [sessionId, now]);
}

/** Deletes the user's ended sessions (expired or revoked), so that the table holds about one row per signed-in browser. */
export async function pruneSignInSessions(db: Queryable, userId: string, now: Date): Promise<void> {
  await db.query('DELETE FROM sign_in_sessions WHERE user_id = $1 AND (expires_at <= $2 OR revoked_at IS NOT NULL)', [userId, now]);
  await db.query('DELETE FROM sign_in_links WHERE user_id = $1 AND (expires_at <= $2 OR used_at IS NOT NULL)', [userId, now]);
}

/** Revokes every live session of a user (an operator's "sign out everywhere"); returns how many. */
export async function revokeUserSignInSessions(db: Queryable, userId: string, now: Date): Promise<number> {
  const { rowCount } = await db.query('UPDATE sign_in_sessions SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL', [userId, now]);
  return rowCount ?? 0;
}

export async function countLiveSignInSessions(db: Queryable, now: Date): Promise<number> {
  const { rows } = await db.query<{ count: string }>('SELECT count(*) FROM sign_in_sessions WHERE revoked_at IS NULL AND expires_at > $1', [now]);
  return Number(rows[0]!.count);
}

// ---- one-time sign-in links (embedded mode) ----

/** A one-time link token for the user; the database keeps its hash. */
export async function createSignInLink(db: Queryable, userId: string, lifetimeMs: number, now: Date): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  await db.query('INSERT INTO sign_in_links (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)', [
    tokenHash(token),
    userId,
    now,
    new Date(now.getTime() + lifetimeMs),
  ]);
  return token;
}

/** Uses a link: its user the first time within its lifetime, `undefined` ever after. */
export async function consumeSignInLink(db: Queryable, token: string, now: Date): Promise<string | undefined> {
  const { rows } = await db.query<{ user_id: string }>(
    'UPDATE sign_in_links SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 RETURNING user_id',
    [tokenHash(token), now],
  );
  return rows[0]?.user_id;
}
