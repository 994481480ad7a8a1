import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';

/** A BYOI provider configuration: the spec's ProviderConfig. */
export interface ProviderConfig {
  provider: string;
  enabled: boolean;
  /** Name of an organization secret holding the credential (a token, a kubeconfig, an API key). */
  credentialRef: string;
  config: Record<string, unknown> | null;
  createdAt: string;
}

interface Row {
  provider: string;
  enabled: boolean;
  credential_ref: string;
  config: Record<string, unknown> | null;
  created_at: Date;
}

const view = (row: Row): ProviderConfig => ({
  provider: row.provider,
  enabled: row.enabled,
  credentialRef: row.credential_ref,
  config: row.config,
  createdAt: row.created_at.toISOString(),
});

export async function listProviderConfigs(db: Queryable, organizationId: string, mode: Mode): Promise<ProviderConfig[]> {
  const { rows } = await db.query<Row>(
    'SELECT provider, enabled, credential_ref, config, created_at FROM provider_configs WHERE organization_id = $1 AND mode = $2 ORDER BY provider',
    [organizationId, mode],
  );
  return rows.map(view);
}

/** The organization's configuration of `provider`, enabled or not; undefined means managed. */
export async function getProviderConfig(db: Queryable, organizationId: string, mode: Mode, provider: string): Promise<ProviderConfig | undefined> {
  const { rows } = await db.query<Row>(
    'SELECT provider, enabled, credential_ref, config, created_at FROM provider_configs WHERE organization_id = $1 AND mode = $2 AND provider = $3',
    [organizationId, mode, provider],
  );
  return rows[0] ? view(rows[0]) : undefined;
}

export async function putProviderConfig(
  db: Queryable,
  where: { organizationId: string; mode: Mode },
  input: { provider: string; credentialRef: string; config: Record<string, unknown> | null; enabled: boolean },
  at: Date,
): Promise<void> {
  await db.query(
    `INSERT INTO provider_configs (organization_id, mode, provider, credential_ref, config, enabled, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
     ON CONFLICT (organization_id, mode, provider)
     DO UPDATE SET credential_ref = EXCLUDED.credential_ref, config = EXCLUDED.config, enabled = EXCLUDED.enabled, updated_at = EXCLUDED.updated_at`,
    [where.organizationId, where.mode, input.provider, input.credentialRef, input.config === null ? null : JSON.stringify(input.config), input.enabled, at],
  );
}

export async function deleteProviderConfig(db: Queryable, where: { organizationId: string; mode: Mode }, provider: string): Promise<boolean> {
  const result = await db.query('DELETE FROM provider_configs WHERE organization_id = $1 AND mode = $2 AND provider = $3', [
    where.organizationId,
    where.mode,
    provider,
  ]);
  return (result.rowCount ?? 0) > 0;
}
