import type { Logger, Member, Principal, Role, SignInSession, User } from '@berth/common';

export type { Principal } from '@berth/common';

/**
 * Who calls a management (`/api`) route: the signed-in user, their sign-in session and, on
 * routes that act in an organization, their accepted membership of it, read afresh on this
 * request (so a removal or a role change applies to the very next request).
 */
export interface Caller {
  user: User;
  session: SignInSession;
  /** The organization the session acts in and the caller's membership; absent on routes that need only a signed-in user. */
  organizationId: string | undefined;
  member: Member | undefined;
  /** The role checks use: the member's, or `owner` in a single-person organization. */
  role: Role | undefined;
}

declare module 'express-serve-static-core' {
  interface Request {
    requestId: string;
    log: Logger;
    principal?: Principal;
    /** The route reads the body itself, as a stream (RouteSpec.streamBody). */
    berthStreamBody?: boolean;
    caller?: Caller;
  }
}
