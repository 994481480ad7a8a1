import {
  createApiKey,
  createOrganization,
  findDefaultOrganization,
  setOrganizationPlan,
  withTransaction,
  type Organization,
  type Pool,
} from '@berth/common';

const BOOTSTRAP_LOCK = 7_261_998_002;

/**
 * On the first start of an install: one organization, on the enterprise plan (its owner runs
 * the install: local use and the operator's own keys are not throttled), and, with `createKeys`, one live and one
 * test key. The keys are returned in full only here; the database keeps their hashes.
 */
export async function bootstrap(
  pool: Pool,
  options: { createKeys: boolean } = { createKeys: true },
): Promise<{ organization: Organization; newKeys?: { live: string; test: string } }> {
  return withTransaction(pool, async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK]);
    const existing = await findDefaultOrganization(tx);
    if (existing) return { organization: existing };
    const organization = await createOrganization(tx, 'default');
    await setOrganizationPlan(tx, organization.id, 'enterprise');
    if (!options.createKeys) return { organization };
    const live = await createApiKey(tx, { organizationId: organization.id, mode: 'live', label: 'created at first start', createdBy: 'berth up' });
    const test = await createApiKey(tx, { organizationId: organization.id, mode: 'test', label: 'created at first start', createdBy: 'berth up' });
    return { organization, newKeys: { live: live.key, test: test.key } };
  });
}
