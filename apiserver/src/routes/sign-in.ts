import {
  ApiError,
  countAcceptedMembers,
  acceptInvite,
  findMembership,
  listMemberships,
  listPendingInvites,
  revokeSignInSession,
  setSignInSessionOrganization,
  type Clock,
  type Pool,
} from '@berth/common';
import type { Request, Response } from 'express';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { requestOrigin } from '../http/origin.js';
import {
  CSRF_COOKIE,
  OIDC_COOKIE,
  SESSION_COOKIE,
  clearCookie,
  readCookie,
  setCookie,
  type CookieSigner,
} from '../management/cookies.js';
import type { OidcTransaction } from '../management/oidc.js';
import { PERMISSIONS, effectiveRole, roleHolds, type Permission } from '../management/permissions.js';
import { SIGN_IN_LIFETIME_MS, type SignInService } from '../management/sign-in.js';
import { okSchema } from './schemas.js';
import { teamMember } from '../services/team.js';
import { teamMemberSchema } from './team.js';

/** The provider must send the browser back within this time. */
const OIDC_TRANSACTION_MS = 10 * 60 * 1000;
const DEFAULT_RETURN = '/api/me';

export interface SignInRouteDeps {
  pool: Pool;
  clock: Clock;
  signIn: SignInService;
  signer: CookieSigner;
  /** Where the dashboard is served (`https://…` makes cookies `Secure`); default: the origin each request came to. */
  dashboardUrl: string | undefined;
}

/** Only a path of this site: a `returnTo` that names another host would make sign-in an open redirect. */
function safeReturnTo(value: string | undefined): string {
  return value && value.startsWith('/') && !value.startsWith('//') && !value.includes('\\') ? value : DEFAULT_RETURN;
}

const roleSchema = z.enum(['owner', 'admin', 'member', 'viewer']);

export function signInRoutes(table: RouteTable, deps: SignInRouteDeps): void {
  const baseUrl = (req: Request) => deps.dashboardUrl ?? requestOrigin(req) ?? '';
  const secure = (req: Request) => baseUrl(req).startsWith('https:');

  function startBrowserSession(req: Request, res: Response, token: string, csrfToken: string) {
    const options = { secure: secure(req), path: '/', maxAgeMs: SIGN_IN_LIFETIME_MS };
    setCookie(res, SESSION_COOKIE, deps.signer.sign(token), { ...options, httpOnly: true });
    setCookie(res, CSRF_COOKIE, csrfToken, { ...options, httpOnly: false });
  }

  table.add(
    defineRoute({
      method: 'get',
      path: '/api/auth/login',
      operationId: 'signIn',
      tag: 'Sign-in',
      summary: 'Sign in with the identity provider',
      description:
        "Redirects to the install's OpenID Connect provider (authorization code flow with PKCE); the provider sends the browser back to `/api/auth/callback`. 404 when the install has no provider configured (embedded installs sign in with the link of `berth admin login`).",
      auth: false,
      query: z.object({ returnTo: z.string().max(1000).optional().describe('a path of this site to land on after sign-in (default /api/me)') }).strict(),
      responses: { 302: { description: "to the identity provider's authorization endpoint" } },
      errors: ['not_found', 'provider_error'],
      handler: async ({ req, res, query }) => {
        const oidc = deps.signIn.oidc;
        if (!oidc) throw new ApiError('not_found', 'no identity provider is configured on this install; sign in with the link `berth admin login` prints');
        const started = await oidc.start(`${baseUrl(req)}/api/auth/callback`, safeReturnTo(query.returnTo)).catch((error: unknown) => {
          throw new ApiError('provider_error', `the identity provider could not be reached: ${(error as Error).message}`, { provider: 'oidc' });
        });
        const value = Buffer.from(JSON.stringify({ ...started.transaction, expiresAt: deps.clock.now().getTime() + OIDC_TRANSACTION_MS })).toString('base64url');
        setCookie(res, OIDC_COOKIE, deps.signer.sign(value), { secure: secure(req), httpOnly: true, path: '/api/auth', maxAgeMs: OIDC_TRANSACTION_MS });
        res.redirect(302, started.url);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/auth/callback',
      operationId: 'signInCallback',
      tag: 'Sign-in',
      summary: "The identity provider's redirect back",
      description:
        'Checks state, nonce and the PKCE verifier kept in the browser since `/api/auth/login`, exchanges the code, records the user (a `usr_…` id at their first sign-in), starts a sign-in session and redirects to `returnTo`. A failed sign-in answers 401 `unauthorized`.',
      auth: false,
      // The provider adds parameters of its own (iss, session_state, error_description): they go to openid-client unread here.
      // As RFC 6749 has them (printable ASCII; the state is our own base64url), and bounded so that
      // a URL at the limits stays within the 16 KiB of headers the server reads.
      query: z.looseObject({
        state: z.string().max(200).regex(/^[A-Za-z0-9_-]*$/).optional(),
        code: z.string().max(2048).regex(/^[\x20-\x7e]*$/).optional(),
        error: z.string().max(200).regex(/^[\x20-\x7e]*$/).optional(),
      }),
      responses: { 302: { description: 'signed in: to `returnTo`, with the session cookie' } },
      errors: ['unauthorized', 'not_found'],
      handler: async ({ req, res, query }) => {
        const oidc = deps.signIn.oidc;
        if (!oidc) throw new ApiError('not_found', 'no identity provider is configured on this install');
        const raw = deps.signer.verify(readCookie(req, OIDC_COOKIE));
        clearCookie(res, OIDC_COOKIE, { secure: secure(req), httpOnly: true, path: '/api/auth' });
        const transaction = raw ? (JSON.parse(Buffer.from(raw, 'base64url').toString()) as OidcTransaction & { expiresAt: number }) : undefined;
        if (!transaction || transaction.expiresAt < deps.clock.now().getTime()) {
          deps.signIn.count('oidc', 'failure');
          throw new ApiError('unauthorized', 'sign-in failed: the sign-in started in another browser or too long ago; start again at /api/auth/login', { reason: 'no_transaction' });
        }
        if (query.error) {
          deps.signIn.count('oidc', 'failure');
          throw new ApiError('unauthorized', `sign-in failed: the identity provider answered ${query.error}`, { reason: 'provider', error: query.error });
        }
        // The redirect URL as registered (a proxy may have served it under another path), with the provider's parameters.
        const callbackUrl = new URL(transaction.redirectUri);
        callbackUrl.search = new URL(req.originalUrl, 'http://callback.invalid').search;
        let identity;
        try {
          identity = await oidc.finish(callbackUrl, transaction);
        } catch (error) {
          deps.signIn.count('oidc', 'failure');
          req.log.warn({ err: error }, 'sign-in failed');
          throw new ApiError('unauthorized', `sign-in failed: ${(error as Error).message}`, { reason: 'exchange' });
        }
        const { token, session } = await deps.signIn.signInWithIdentity(identity);
        deps.signIn.count('oidc', 'success');
        startBrowserSession(req, res, token, session.csrfToken);
        res.redirect(302, transaction.returnTo);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/auth/link',
      operationId: 'signInWithLink',
      tag: 'Sign-in',
      summary: 'Sign in with a one-time link',
      description:
        'Embedded mode without an identity provider: `berth up` prints such a link for the first owner on first start, `berth admin login` prints a new one. A link works once, within 24 hours.',
      auth: false,
      query: z
        .object({
          token: z.string().min(1).max(200),
          returnTo: z.string().max(2000).optional().describe('a path of this site to land on (the dashboard sends `/`); default `/api/me`'),
        })
        .strict(),
      responses: { 302: { description: 'signed in: to `returnTo` (default /api/me), with the session cookie' } },
      // 431: a one-time token and a returnTo of its full length, percent-encoded, can pass the 16 KiB header limit.
      errors: ['unauthorized', 'headers_too_large'],
      handler: async ({ req, res, query }) => {
        const signedIn = await deps.signIn.signInWithLink(query.token);
        if (!signedIn) {
          deps.signIn.count('link', 'failure');
          throw new ApiError('unauthorized', 'this sign-in link is not valid: it was used already or expired; `berth admin login` prints a new one', { reason: 'link' });
        }
        deps.signIn.count('link', 'success');
        startBrowserSession(req, res, signedIn.token, signedIn.session.csrfToken);
        res.redirect(302, safeReturnTo(query.returnTo));
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/auth/logout',
      operationId: 'signOut',
      tag: 'Sign-in',
      summary: 'Sign out',
      description: 'Revokes the sign-in session on the server (the cookie no longer works anywhere) and clears the cookies.',
      permission: 'signed-in',
      responses: { 200: { description: 'signed out', schema: okSchema, example: { ok: true } } },
      errors: ['forbidden'],
      handler: async ({ req, res, caller }) => {
        await revokeSignInSession(deps.pool, caller.session.id, deps.clock.now());
        clearCookie(res, SESSION_COOKIE, { secure: secure(req), httpOnly: true, path: '/' });
        clearCookie(res, CSRF_COOKIE, { secure: secure(req), httpOnly: false, path: '/' });
        return { status: 200, body: { ok: true } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/me',
      operationId: 'me',
      tag: 'Sign-in',
      summary: 'The signed-in user',
      description:
        'The user (their `usr_…` id is what an admin invites), the organization the session acts in with their role, all their organizations, and the CSRF token that state-changing `/api` requests send in `X-CSRF-Token`.',
      permission: 'signed-in',
      responses: {
        200: {
          description: 'the user',
          schema: z.object({
            user: z.object({ id: z.string(), email: z.string().nullable(), name: z.string().nullable() }),
            organization: z.object({ id: z.string(), name: z.string(), role: roleSchema }).nullable().describe('null until the user belongs to one'),
            organizations: z.array(z.object({ id: z.string(), name: z.string(), role: roleSchema })),
            csrfToken: z.string(),
            permissions: z
              .array(z.string())
              .describe('what the caller may do in that organization now (the permission table for their role, one person being owner for every check); empty without one. The dashboard offers only these; the server checks each request anyway'),
          }),
          example: {
            user: { id: 'usr_01m80gqv2b7h3y9k0x1c4r5t6v', email: 'ada@example.com', name: 'Ada' },
            organization: { id: 'org_01m80gqv2b7h3y9k0x1c4r5t6v', name: 'default', role: 'owner' },
            organizations: [{ id: 'org_01m80gqv2b7h3y9k0x1c4r5t6v', name: 'default', role: 'owner' }],
            csrfToken: 'b3Jx0m4cJ1W2c9mZQ7pX5tYh2VwK8sLd',
            permissions: ['organization.delete', 'team.manage', 'team.view', 'keys.manage', 'keys.view', 'billing.view'],
          },
        },
      },
      errors: [],
      handler: async ({ caller }) => {
        const memberships = await listMemberships(deps.pool, caller.user.id);
        const organizations = memberships.map((member) => ({ id: member.organizationId, name: member.organizationName, role: member.role }));
        const current = organizations.find((organization) => organization.id === caller.organizationId);
        const role = current && (current.role === 'owner' ? 'owner' : effectiveRole(current.role, await countAcceptedMembers(deps.pool, current.id)));
        return {
          status: 200,
          body: {
            user: { id: caller.user.id, email: caller.user.email, name: caller.user.name },
            organization: current ?? null,
            organizations,
            csrfToken: caller.session.csrfToken,
            permissions: role ? (Object.keys(PERMISSIONS) as Permission[]).filter((permission) => roleHolds(role, permission)) : [],
          },
        };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/me/organization',
      operationId: 'switchOrganization',
      tag: 'Sign-in',
      summary: 'Act in another organization',
      description: 'Points the sign-in session at another organization the user is a member of.',
      permission: 'signed-in',
      body: z.object({ organizationId: z.string().min(1).max(128) }).strict(),
      requestExample: { organizationId: 'org_01m80gqv2b7h3y9k0x1c4r5t6v' },
      responses: { 200: { description: 'switched', schema: z.object({ organizationId: z.string() }), example: { organizationId: 'org_01m80gqv2b7h3y9k0x1c4r5t6v' } } },
      errors: ['forbidden'],
      handler: async ({ caller, body }) => {
        if (!(await findMembership(deps.pool, body.organizationId, caller.user.id))) {
          throw new ApiError('forbidden', 'you are not a member of this organization', { reason: 'not_a_member', organizationId: body.organizationId });
        }
        await setSignInSessionOrganization(deps.pool, caller.session.id, body.organizationId);
        return { status: 200, body: { organizationId: body.organizationId } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/invites',
      operationId: 'listMyInvites',
      tag: 'Sign-in',
      summary: "The signed-in user's pending invites",
      description: 'Invites to organizations that have not expired (7 days) or been accepted.',
      permission: 'signed-in',
      responses: {
        200: {
          description: 'the invites',
          schema: z.object({
            data: z.array(
              z.object({ id: z.string(), organizationId: z.string(), organizationName: z.string(), role: roleSchema, invitedAt: z.string(), expiresAt: z.string() }),
            ),
          }),
          example: {
            data: [
              {
                id: 'mem_01m80gqv9d4kjqfcmvs2q4jxem',
                organizationId: 'org_01m80gqv2b7h3y9k0x1c4r5t6v',
                organizationName: 'acme',
                role: 'member',
                invitedAt: '2026-11-23T16:00:00.000Z',
                expiresAt: '2026-11-30T16:00:00.000Z',
              },
            ],
          },
        },
      },
      errors: [],
      handler: async ({ caller }) => {
        const invites = await listPendingInvites(deps.pool, caller.user.id, deps.clock.now());
        return {
          status: 200,
          body: {
            data: invites.map((invite) => ({
              id: invite.id,
              organizationId: invite.organizationId,
              organizationName: invite.organizationName,
              role: invite.role,
              invitedAt: invite.invitedAt,
              expiresAt: invite.expiresAt!,
            })),
          },
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/invites/:memberId/accept',
      operationId: 'acceptInvite',
      tag: 'Sign-in',
      summary: 'Accept an invite',
      description:
        "Makes the signed-in user a member of the inviting organization with the invite's role, and points their session at it. 404 for an invite that is not theirs, was accepted, or has expired.",
      permission: 'signed-in',
      params: z.object({ memberId: z.string().min(1).max(128).describe('the invite (`mem_…`)') }).strict(),
      responses: {
        200: {
          description: 'accepted',
          schema: teamMemberSchema,
          example: {
            id: 'mem_01m80gqv9d4kjqfcmvs2q4jxem',
            userId: 'usr_01m80gqv2b7h3y9k0x1c4r5t6v',
            role: 'member',
            invitedAt: '2026-11-23T16:00:00.000Z',
            acceptedAt: '2026-11-23T17:00:00.000Z',
            pending: false,
            expiresAt: null,
          },
        },
      },
      errors: ['not_found'],
      handler: async ({ caller, params }) => {
        const member = await acceptInvite(deps.pool, params.memberId, caller.user.id, deps.clock.now());
        if (!member) throw new ApiError('not_found', `no pending invite ${params.memberId} for you (it may have expired after 7 days)`, { memberId: params.memberId });
        await setSignInSessionOrganization(deps.pool, caller.session.id, member.organizationId);
        return { status: 200, body: teamMember(member) };
      },
    }),
  );
}
