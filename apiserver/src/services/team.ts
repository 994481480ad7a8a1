import {
  ApiError,
  findMember,
  findMembership,
  findUser,
  inviteMember,
  listMembers,
  recordAudit,
  removeMember,
  setMemberRole,
  transferOwnership,
  withTransaction,
  type Clock,
  type Member,
  type Pool,
  type PoolClient,
  type Role,
} from '@berth/common';
import type { Caller } from '../http/context.js';
import { actorOf } from '../management/acting.js';

export type AssignableRole = Exclude<Role, 'owner'>;

/** A member as the spec shows it, with `expiresAt` for pending invites. */
export interface TeamMember {
  id: string;
  userId: string;
  role: Role;
  invitedAt: string;
  acceptedAt: string | null;
  pending: boolean;
  expiresAt: string | null;
}

export function teamMember(member: Member): TeamMember {
  return {
    id: member.id,
    userId: member.userId,
    role: member.role,
    invitedAt: member.invitedAt,
    acceptedAt: member.acceptedAt,
    pending: member.acceptedAt === null,
    expiresAt: member.expiresAt,
  };
}

/**
 * The team routes and their five server rules. Every change runs in one transaction that first
 * locks the organization's member rows, so two concurrent changes (say, a transfer and a removal)
 * see each other's result, and re-reads the caller's role inside it.
 */
export function createTeamService(deps: { pool: Pool; clock: Clock }) {
  async function inOrganization<T>(caller: Caller, work: (tx: PoolClient, callerMember: Member, now: Date) => Promise<T>): Promise<T> {
    const organizationId = caller.organizationId!;
    return withTransaction(deps.pool, async (tx) => {
      await tx.query('SELECT id FROM organization_members WHERE organization_id = $1 ORDER BY id FOR UPDATE', [organizationId]);
      const callerMember = await findMembership(tx, organizationId, caller.user.id);
      if (!callerMember) throw new ApiError('forbidden', 'you are not a member of this organization', { reason: 'not_a_member' });
      return work(tx, callerMember, deps.clock.now());
    });
  }

  /** Each change of the team is in the audit log, written in the change's transaction. */
  function audit(tx: PoolClient, caller: Caller, action: string, memberId: string, details: Record<string, unknown>, now: Date) {
    return recordAudit(tx, { organizationId: caller.organizationId!, actor: actorOf(caller), action, target: { type: 'member', id: memberId }, details, at: now });
  }

  async function target(tx: PoolClient, caller: Caller, memberId: string, now: Date): Promise<Member> {
    const member = await findMember(tx, caller.organizationId!, memberId, now);
    if (!member) throw new ApiError('not_found', `member ${memberId} not found`, { memberId });
    return member;
  }

  return {
    async list(caller: Caller): Promise<{ members: TeamMember[]; currentUserId: string; currentRole: Role }> {
      const members = await listMembers(deps.pool, caller.organizationId!, deps.clock.now());
      return { members: members.map(teamMember), currentUserId: caller.user.id, currentRole: caller.role! };
    },

    async invite(caller: Caller, input: { userId: string; role: Role }): Promise<TeamMember> {
      // Rule: an invite never makes an owner (there is one, and it changes only by transfer).
      if (input.role === 'owner') throw new ApiError('invalid_role', 'an invite cannot make an owner: invite as admin, then transfer ownership', { role: 'owner' });
      return inOrganization(caller, async (tx, _callerMember, now) => {
        if (!(await findUser(tx, input.userId))) {
          throw new ApiError('not_found', `user ${input.userId} not found: people get a user id (usr_…) at their first sign-in (GET /api/me)`, {
            userId: input.userId,
          });
        }
        // Rule 4: a live invite or a membership of the same user is a conflict.
        const invited = await inviteMember(
          tx,
          { organizationId: caller.organizationId!, userId: input.userId, role: input.role as AssignableRole, invitedBy: caller.user.id },
          now,
        );
        if (!invited) throw new ApiError('already_member', `user ${input.userId} is already a member or has a pending invite`, { userId: input.userId });
        await audit(tx, caller, 'member.invited', invited.id, { userId: input.userId, role: input.role }, now);
        return teamMember(invited);
      });
    },

    async changeRole(caller: Caller, memberId: string, role: Role): Promise<{ id: string; role: Role }> {
      // Rule 3.
      if (role === 'owner') throw new ApiError('invalid_role', 'the owner role moves only by POST /api/team/transfer', { role });
      return inOrganization(caller, async (tx, callerMember, now) => {
        const member = await target(tx, caller, memberId, now);
        // Rule 1.
        if (member.role === 'owner') {
          throw new ApiError('forbidden', "the owner's role cannot be changed: transfer ownership first (POST /api/team/transfer)", { reason: 'owner' });
        }
        // As with removal (rule 2): an admin's role is the owner's to change, except the admin's own.
        if (member.role === 'admin' && callerMember.role !== 'owner' && member.id !== callerMember.id) {
          throw new ApiError('forbidden', "only the owner can change another admin's role", { reason: 'admin' });
        }
        await setMemberRole(tx, member.id, role);
        await audit(tx, caller, 'member.role_changed', member.id, { userId: member.userId, from: member.role, to: role }, now);
        return { id: member.id, role };
      });
    },

    async remove(caller: Caller, memberId: string): Promise<{ ok: true }> {
      return inOrganization(caller, async (tx, callerMember, now) => {
        const member = await target(tx, caller, memberId, now);
        // Rule 1.
        if (member.role === 'owner') {
          throw new ApiError('forbidden', 'the owner cannot be removed: transfer ownership first (POST /api/team/transfer)', { reason: 'owner' });
        }
        // Rule 2; an admin may still leave (remove themselves).
        if (member.role === 'admin' && callerMember.role !== 'owner' && member.id !== callerMember.id) {
          throw new ApiError('forbidden', 'only the owner can remove an admin', { reason: 'admin' });
        }
        await removeMember(tx, member.id);
        await audit(tx, caller, 'member.removed', member.id, { userId: member.userId, role: member.role, pending: member.acceptedAt === null }, now);
        return { ok: true as const };
      });
    },

    async transfer(caller: Caller, newOwnerId: string): Promise<{ ok: true }> {
      return inOrganization(caller, async (tx, callerMember, now) => {
        if (callerMember.role !== 'owner') throw new ApiError('forbidden', 'only the owner can transfer ownership', { reason: 'role' });
        const member = await target(tx, caller, newOwnerId, now);
        // Rule 5.
        if (member.acceptedAt === null) {
          throw new ApiError('transfer_to_pending', `member ${member.id} has not accepted the invite yet`, { memberId: member.id });
        }
        if (member.id === callerMember.id) throw new ApiError('conflict', 'you are the owner already', { memberId: member.id });
        await transferOwnership(tx, caller.organizationId!, callerMember.id, member.id);
        await audit(tx, caller, 'ownership.transferred', member.id, { from: caller.user.id, to: member.userId }, now);
        return { ok: true as const };
      });
    },
  };
}

export type TeamService = ReturnType<typeof createTeamService>;
