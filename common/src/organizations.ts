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
