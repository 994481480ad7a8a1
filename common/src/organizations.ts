import type { Queryable } from './db/index.js';
import { newId } from './ids.js';

export interface Organization {
  id: string;
  name: string;
}

export async function findDefaultOrganization(db: Queryable): Promise<Organization | undefined> {
  const { rows } = await db.query<Organization>('SELECT id, name FROM organizations ORDER BY created_at, id LIMIT 1');
  return rows[0];
}

export async function createOrganization(db: Queryable, name: string): Promise<Organization> {
  const { rows } = await db.query<Organization>('INSERT INTO organizations (id, name) VALUES ($1, $2) RETURNING id, name', [
    newId('org'),
    name,
  ]);
  return rows[0]!;
}

export async function findOrganization(db: Queryable, id: string): Promise<Organization | undefined> {
  const { rows } = await db.query<Organization>('SELECT id, name FROM organizations WHERE id = $1', [id]);
  return rows[0];
}

/** The oldest organization that has no owner yet: the one the first person to sign in to an install takes. */
export async function findOwnerlessOrganization(db: Queryable): Promise<Organization | undefined> {
  const { rows } = await db.query<Organization>(
    `SELECT id, name FROM organizations o
     WHERE NOT EXISTS (SELECT 1 FROM organization_members m WHERE m.organization_id = o.id AND m.role = 'owner')
     ORDER BY created_at, id LIMIT 1`,
  );
  return rows[0];
}
