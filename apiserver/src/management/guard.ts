import {
  ApiError,
  countAcceptedMembers,
  findMembership,
  findSignInSession,
  findUser,
  type Clock,
  type Queryable,
} from '@berth/common';
import type { RequestHandler } from 'express';
import { CSRF_HEADER, SESSION_COOKIE, readCookie, sameToken, type CookieSigner } from './cookies.js';
import { effectiveRole, roleHolds, PERMISSIONS, type Permission } from './permissions.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export interface GuardDeps {
  db: Queryable;
  clock: Clock;
  signer: CookieSigner;
}

/**
 * The first guard of every cookie-authorized `/api` route: the signed session cookie, the live
 * server-side session it names (not revoked, not expired) and its user. A state-changing request
 * must also echo the session's CSRF token in `X-CSRF-Token`; a cross-site form or script cannot
 * read it, so it cannot act with the user's cookie.
 */
export function authenticateUser(deps: GuardDeps): RequestHandler {
  return async (req, _res, next) => {
    const token = deps.signer.verify(readCookie(req, SESSION_COOKIE));
    const session = token ? await findSignInSession(deps.db, token, deps.clock.now()) : undefined;
    if (!session) throw new ApiError('unauthorized', 'not signed in: sign in at /api/auth/login', { signIn: '/api/auth/login' });
    const user = await findUser(deps.db, session.userId);
    if (!user) throw new ApiError('unauthorized', 'not signed in: sign in at /api/auth/login', { signIn: '/api/auth/login' });
    if (!SAFE_METHODS.has(req.method)) {
      const sent = req.get(CSRF_HEADER);
      if (!sent || !sameToken(sent, session.csrfToken)) {
        throw new ApiError('forbidden', 'missing or wrong CSRF token: send the csrfToken of GET /api/me in the X-CSRF-Token header', {
          reason: 'csrf',
        });
      }
    }
    req.caller = { user, session, organizationId: session.organizationId ?? undefined, member: undefined, role: undefined };
    req.log = req.log.child({ userId: user.id, signInSessionId: session.id });
    next();
  };
}

/**
 * The second guard: the caller's accepted membership of the session's organization, read on this
 * request, and a role that holds `permission` in the spec's table. Denials are 403 `forbidden`
 * with `details.reason`: `no_organization`, `not_a_member` (never invited, still pending, or
 * removed), or `role` (with the permission and the roles that hold it).
 */
export function requirePermission(deps: Pick<GuardDeps, 'db'>, permission: Permission): RequestHandler {
  return async (req, _res, next) => {
    const caller = req.caller;
    if (!caller) throw new Error('requirePermission runs after authenticateUser');
    if (!caller.organizationId) {
      throw new ApiError('forbidden', 'you do not belong to an organization yet: accept an invite (GET /api/invites)', { reason: 'no_organization' });
    }
    const member = await findMembership(deps.db, caller.organizationId, caller.user.id);
    if (!member) throw new ApiError('forbidden', 'you are not a member of this organization', { reason: 'not_a_member', organizationId: caller.organizationId });
    const role = member.role === 'owner' ? 'owner' : effectiveRole(member.role, await countAcceptedMembers(deps.db, caller.organizationId));
    caller.member = member;
    caller.role = role;
    if (!roleHolds(role, permission)) {
      throw new ApiError('forbidden', `your role (${role}) does not allow this (${permission})`, {
        reason: 'role',
        permission,
        role,
        allowedRoles: PERMISSIONS[permission],
      });
    }
    next();
  };
}
