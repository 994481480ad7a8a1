import {
  ApiError,
  createApiKey,
  isId,
  listApiKeys,
  recordAudit,
  revokeApiKey,
  withTransaction,
  type ApiKeyRecord,
  type AuditActor,
  type Clock,
  type Pool,
} from '@berth/common';
import type { Mode } from '@berth/crds';

/**
 * An organization's API keys as its people manage them (the management plane) and as the
 * install's command line does (`berth keys`): every creation and revocation is written to the
 * audit log in the same transaction. A key belongs to the organization; its creator is kept
 * for the record only, so the key outlives the creator's membership.
 */
export function createApiKeyService(deps: { pool: Pool; clock: Clock }) {
  const { pool, clock } = deps;
  return {
    /** The full key is in the answer, and nowhere else ever again. */
    async create(organizationId: string, actor: AuditActor, input: { mode: Mode; label: string }): Promise<{ key: string; record: ApiKeyRecord }> {
      return withTransaction(pool, async (tx) => {
        const created = await createApiKey(tx, { organizationId, mode: input.mode, label: input.label, createdBy: actor.id, createdAt: clock.now() });
        await recordAudit(tx, {
          organizationId,
          actor,
          action: 'api_key.created',
          target: { type: 'api_key', id: created.record.id },
          details: { prefix: created.record.prefix, mode: input.mode, label: input.label },
          at: clock.now(),
        });
        return created;
      });
    },

    list(organizationId: string): Promise<ApiKeyRecord[]> {
      return listApiKeys(pool, organizationId);
    },

    /** The key's next request is refused with `auth/key_revoked`; revoking twice keeps the first time. */
    async revoke(organizationId: string, actor: AuditActor, id: string): Promise<ApiKeyRecord> {
      return withTransaction(pool, async (tx) => {
        const { rows } = isId(id, 'key')
          ? await tx.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM api_keys WHERE id = $1 AND organization_id = $2 FOR UPDATE', [id, organizationId])
          : { rows: [] };
        if (!rows[0]) throw new ApiError('not_found', `API key ${id} does not exist`, { id });
        const revoked = (await revokeApiKey(tx, id, clock.now()))!;
        if (!rows[0].revoked_at) {
          await recordAudit(tx, {
            organizationId,
            actor,
            action: 'api_key.revoked',
            target: { type: 'api_key', id },
            details: { prefix: revoked.prefix, mode: revoked.mode, label: revoked.label },
            at: clock.now(),
          });
        }
        return revoked;
      });
    },
  };
}

export type ApiKeyService = ReturnType<typeof createApiKeyService>;
