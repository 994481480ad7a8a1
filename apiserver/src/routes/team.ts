import { ROLES } from '@berth/common';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { TeamService } from '../services/team.js';
import { okSchema } from './schemas.js';

const roleSchema = z.enum(ROLES);
export const teamMemberSchema = z
  .object({
    id: z.string().describe('`mem_…`: the member id the other team routes take'),
    userId: z.string().describe('`usr_…`'),
    role: roleSchema,
    invitedAt: z.string(),
    acceptedAt: z.string().nullable().describe('null while the invite is pending'),
    pending: z.boolean(),
    expiresAt: z.string().nullable().describe('when a pending invite expires (7 days after it was sent); null once accepted'),
  })
  .meta({ id: 'OrganizationMember', description: 'a member of the organization, or a pending invite' });

const memberParam = z.object({ memberId: z.string().min(1).max(128).describe('member id (`mem_…`)') }).strict();

const memberExample = {
  id: 'mem_01m80gqv9d4kjqfcmvs2q4jxem',
  userId: 'usr_01m80gqv2b7h3y9k0x1c4r5t6v',
  role: 'member',
  invitedAt: '2026-11-23T16:00:00.000Z',
  acceptedAt: null,
  pending: true,
  expiresAt: '2026-11-30T16:00:00.000Z',
};

export function teamRoutes(table: RouteTable, team: TeamService): void {
  table.add(
    defineRoute({
      method: 'post',
      path: '/api/team',
      operationId: 'inviteMember',
      tag: 'Team',
      summary: 'Invite a user',
      description:
        'Invites a user (by the `usr_…` id they got at their first sign-in) with a role; the invite is pending, grants nothing until they accept it (`POST /api/invites/{memberId}/accept`) and expires after 7 days. `owner` is refused with `invalid_role`; a user with a pending invite or a membership with `already_member`.',
      permission: 'team.manage',
      body: z
        .object({
          userId: z.string().min(1).max(128).describe('the user to invite (`usr_…`)'),
          role: roleSchema.default('member').describe('`admin`, `member` or `viewer`; `owner` is refused with 400 `invalid_role`'),
        })
        .strict(),
      requestExample: { userId: 'usr_01m80gqv2b7h3y9k0x1c4r5t6v', role: 'member' },
      responses: {
        201: {
          description: 'the pending invite',
          schema: teamMemberSchema.pick({ id: true, userId: true, role: true, invitedAt: true, pending: true, expiresAt: true }),
          example: { ...memberExample, acceptedAt: undefined },
        },
      },
      errors: ['invalid_role', 'already_member', 'not_found', 'forbidden'],
      handler: async ({ caller, body }) => ({ status: 201, body: await team.invite(caller, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/team',
      operationId: 'listTeam',
      tag: 'Team',
      summary: 'List the team',
      description: 'Members and pending invites (expired invites are left out), the owner first; with the caller\'s user id and role.',
      permission: 'team.view',
      responses: {
        200: {
          description: 'the team',
          schema: z.object({
            members: z.array(teamMemberSchema),
            currentUserId: z.string(),
            currentRole: roleSchema.describe('the role checks use: `owner` in a single-person organization'),
          }),
          example: {
            members: [{ ...memberExample, id: 'mem_01m80gqv00000000000000000a', userId: 'usr_01m80gqv00000000000000000a', role: 'owner', acceptedAt: '2026-11-20T09:00:00.000Z', pending: false, expiresAt: null }, memberExample],
            currentUserId: 'usr_01m80gqv00000000000000000a',
            currentRole: 'owner',
          },
        },
      },
      errors: ['forbidden'],
      handler: async ({ caller }) => ({ status: 200, body: await team.list(caller) }),
    }),
    defineRoute({
      method: 'patch',
      path: '/api/team/:memberId',
      operationId: 'changeMemberRole',
      tag: 'Team',
      summary: "Change a member's role",
      description:
        "Owner or admin. `owner` is refused with `invalid_role` (ownership moves by transfer); the owner's role cannot be changed, and only the owner can change another admin's role (both 403 `forbidden`). Takes effect on the member's next request.",
      permission: 'team.manage',
      params: memberParam,
      body: z.object({ role: roleSchema.describe('`admin`, `member` or `viewer`') }).strict(),
      requestExample: { role: 'admin' },
      responses: { 200: { description: 'changed', schema: z.object({ id: z.string(), role: roleSchema }), example: { id: memberExample.id, role: 'admin' } } },
      errors: ['invalid_role', 'not_found', 'forbidden'],
      handler: async ({ caller, params, body }) => ({ status: 200, body: await team.changeRole(caller, params.memberId, body.role) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/team/:memberId',
      operationId: 'removeMember',
      tag: 'Team',
      summary: 'Remove a member or cancel an invite',
      description:
        'Owner or admin. The owner cannot be removed (transfer first); an admin can remove members, viewers and themselves, not other admins. The removed user\'s next request is refused.',
      permission: 'team.manage',
      params: memberParam,
      responses: { 200: { description: 'removed', schema: okSchema, example: { ok: true } } },
      errors: ['not_found', 'forbidden'],
      handler: async ({ caller, params }) => ({ status: 200, body: await team.remove(caller, params.memberId) }),
    }),
    defineRoute({
      method: 'post',
      path: '/api/team/transfer',
      operationId: 'transferOwnership',
      tag: 'Team',
      summary: 'Transfer ownership',
      description: 'Owner only. The new owner must have accepted their invite (`transfer_to_pending` otherwise); the caller becomes admin.',
      permission: 'ownership.transfer',
      body: z.object({ newOwnerId: z.string().min(1).max(128).describe('the member id (`mem_…`) of the new owner') }).strict(),
      requestExample: { newOwnerId: 'mem_01m80gqv9d4kjqfcmvs2q4jxem' },
      responses: { 200: { description: 'transferred', schema: okSchema, example: { ok: true } } },
      errors: ['transfer_to_pending', 'not_found', 'conflict', 'forbidden'],
      handler: async ({ caller, body }) => ({ status: 200, body: await team.transfer(caller, body.newOwnerId) }),
    }),
  );
}
