import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { ApiError } from './errors.js';

/**
 * Secrets at rest: AES-256-GCM with a random 96-bit nonce per value, under a 256-bit key from
 * configuration. Each value is bound (as additional authenticated data) to where it belongs
 * (organization, mode, scope, name), so a ciphertext copied to another row does not decrypt.
 * Rows name the key they were written with (its id: the start of its SHA-256); rotation sets a
 * new current key, keeps the old one as a previous key to read with, and re-encrypts
 * (`berth secrets rotate`).
 */
export const SECRET_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
export const SECRET_NAME_RULE = 'letters, digits and _, not starting with a digit, at most 128 characters (an environment variable name)';
export const MAX_SECRET_BYTES = 64 * 1024;

export class SecretKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretKeyError';
  }
}

/** A 32-byte key from its base64 (or 64 hex characters) text. */
export function parseSecretKey(text: string, setting: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-f]{64}$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
  if (key.length !== 32) throw new SecretKeyError(`${setting} must be 32 bytes, base64 (44 characters) or hex (64): got ${key.length} bytes`);
  return key;
}

export function generateSecretKey(): string {
  return randomBytes(32).toString('base64');
}

export const keyIdOf = (key: Buffer) => createHash('sha256').update(key).digest('hex').slice(0, 12);

export interface SecretPlace {
  organizationId: string;
  mode: Mode;
  /** A session id, or '' for the organization. */
  scope: string;
  name: string;
}

const aad = (place: SecretPlace) => Buffer.from(`berth-secret\0${place.organizationId}\0${place.mode}\0${place.scope}\0${place.name}`);

export class SecretBox {
  readonly keyId: string;
  private readonly keys: Map<string, Buffer>;

  constructor(
    private readonly current: Buffer,
    previous: Buffer[] = [],
  ) {
    this.keyId = keyIdOf(current);
    this.keys = new Map([...previous, current].map((key) => [keyIdOf(key), key]));
  }

  /** A key for another purpose (signing cursors, say), derived from the current key: no second secret to configure. */
  subkey(purpose: string): Buffer {
    return createHmac('sha256', this.current).update(purpose).digest();
  }

  seal(place: SecretPlace, value: string): { keyId: string; nonce: Buffer; ciphertext: Buffer } {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.current, nonce);
    cipher.setAAD(aad(place));
    const ciphertext = Buffer.concat([cipher.update(value, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return { keyId: this.keyId, nonce, ciphertext };
  }

  open(place: SecretPlace, sealed: { keyId: string; nonce: Buffer; ciphertext: Buffer }): string {
    const key = this.keys.get(sealed.keyId);
    if (!key) {
      throw new SecretKeyError(
        `secret ${place.name} was encrypted with key ${sealed.keyId}, which is neither BERTH_SECRETS_KEY nor one of BERTH_SECRETS_PREVIOUS_KEYS`,
      );
    }
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.nonce);
    decipher.setAAD(aad(place));
    decipher.setAuthTag(sealed.ciphertext.subarray(sealed.ciphertext.length - 16));
    try {
      return Buffer.concat([decipher.update(sealed.ciphertext.subarray(0, sealed.ciphertext.length - 16)), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretKeyError(`secret ${place.name} does not decrypt: it was altered, or moved from where it was written`);
    }
  }
}

interface SecretRow {
  organization_id: string;
  mode: Mode;
  scope: string;
  name: string;
  key_id: string;
  nonce: Buffer;
  ciphertext: Buffer;
  created_at: Date;
}

/** Stores values under their names (existing names overwritten), all or none. */
export async function putSecrets(db: Queryable, box: SecretBox, where: Omit<SecretPlace, 'name'>, values: Record<string, string>, at: Date): Promise<number> {
  const entries = Object.entries(values);
  for (const [name, value] of entries) {
    const sealed = box.seal({ ...where, name }, value);
    await db.query(
      `INSERT INTO secrets (organization_id, mode, scope, name, key_id, nonce, ciphertext, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
       ON CONFLICT (organization_id, mode, scope, name)
       DO UPDATE SET key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext, updated_at = EXCLUDED.updated_at`,
      [where.organizationId, where.mode, where.scope, name, sealed.keyId, sealed.nonce, sealed.ciphertext, at],
    );
  }
  return entries.length;
}

export async function listSecretNames(db: Queryable, where: Omit<SecretPlace, 'name'>): Promise<{ name: string; createdAt: string }[]> {
  const { rows } = await db.query<{ name: string; created_at: Date }>(
    'SELECT name, created_at FROM secrets WHERE organization_id = $1 AND mode = $2 AND scope = $3 ORDER BY name',
    [where.organizationId, where.mode, where.scope],
  );
  return rows.map((row) => ({ name: row.name, createdAt: row.created_at.toISOString() }));
}

export async function deleteSecret(db: Queryable, place: SecretPlace): Promise<boolean> {
  const result = await db.query('DELETE FROM secrets WHERE organization_id = $1 AND mode = $2 AND scope = $3 AND name = $4', [
    place.organizationId,
    place.mode,
    place.scope,
    place.name,
  ]);
  return (result.rowCount ?? 0) > 0;
}

/** Which of `names` exist for a session: in its own scope or its organization's. */
export async function missingSecrets(db: Queryable, where: { organizationId: string; mode: Mode; sessionId: string }, names: string[]): Promise<string[]> {
  if (names.length === 0) return [];
  const { rows } = await db.query<{ name: string }>(
    "SELECT DISTINCT name FROM secrets WHERE organization_id = $1 AND mode = $2 AND scope IN ('', $3) AND name = ANY($4)",
    [where.organizationId, where.mode, where.sessionId, names],
  );
  const found = new Set(rows.map((row) => row.name));
  return names.filter((name) => !found.has(name));
}

/** 422 naming every secret an agent asks for that neither its session nor its organization has. */
export async function assertSecretsExist(db: Queryable, where: { organizationId: string; mode: Mode; sessionId: string }, names: string[]): Promise<void> {
  const missing = await missingSecrets(db, where, names);
  if (missing.length > 0) {
    const message = `no secret named ${missing.join(', ')} in the session or the organization`;
    throw new ApiError('unprocessable_entity', `secrets: ${message}`, { fields: { secrets: [message] }, missing });
  }
}

/**
 * The values of `names` for a session's agent: the session's own secret wins over the
 * organization's of the same name. Names that exist nowhere are left out (they were checked
 * at agent creation; one deleted since is simply not injected).
 */
export async function resolveSecrets(
  db: Queryable,
  box: SecretBox,
  where: { organizationId: string; mode: Mode; sessionId: string },
  names: string[],
): Promise<Record<string, string>> {
  if (names.length === 0) return {};
  const { rows } = await db.query<SecretRow>(
    "SELECT * FROM secrets WHERE organization_id = $1 AND mode = $2 AND scope IN ('', $3) AND name = ANY($4) ORDER BY (scope = '') DESC",
    [where.organizationId, where.mode, where.sessionId, names],
  );
  const values: Record<string, string> = {};
  // Organization rows first, then the session's over them.
  for (const row of rows) values[row.name] = box.open({ organizationId: row.organization_id, mode: row.mode, scope: row.scope, name: row.name }, { keyId: row.key_id, nonce: row.nonce, ciphertext: row.ciphertext });
  return values;
}

/** Re-encrypts every value not under the current key; returns how many. */
export async function reencryptSecrets(db: Queryable, box: SecretBox): Promise<number> {
  const { rows } = await db.query<SecretRow>('SELECT * FROM secrets WHERE key_id <> $1', [box.keyId]);
  for (const row of rows) {
    const place = { organizationId: row.organization_id, mode: row.mode, scope: row.scope, name: row.name };
    const sealed = box.seal(place, box.open(place, { keyId: row.key_id, nonce: row.nonce, ciphertext: row.ciphertext }));
    await db.query(
      'UPDATE secrets SET key_id = $5, nonce = $6, ciphertext = $7 WHERE organization_id = $1 AND mode = $2 AND scope = $3 AND name = $4 AND key_id = $8',
      [row.organization_id, row.mode, row.scope, row.name, sealed.keyId, sealed.nonce, sealed.ciphertext, row.key_id],
    );
  }
  return rows.length;
}

/**
 * Re-encrypts, under the current key, a value sealed into the columns `<prefix>_key_id`,
 * `<prefix>_nonce` and `<prefix>_ciphertext` of each row of `table` (rows with id, organization_id
 * and mode) that another key sealed; `placeOf` is where the row's value is bound. Returns how many.
 */
export async function reencryptSealedColumns(
  db: Queryable,
  box: SecretBox,
  sealedIn: { table: 'triggers'; prefix: 'secret' } | { table: 'channels'; prefix: 'credentials' },
  placeOf: (row: { id: string; organizationId: string; mode: Mode }) => SecretPlace,
): Promise<number> {
  const { table, prefix } = sealedIn;
  const { rows } = await db.query<{ id: string; organization_id: string; mode: Mode; key_id: string; nonce: Buffer; ciphertext: Buffer }>(
    `SELECT id, organization_id, mode, ${prefix}_key_id AS key_id, ${prefix}_nonce AS nonce, ${prefix}_ciphertext AS ciphertext FROM ${table}
     WHERE ${prefix}_key_id IS NOT NULL AND ${prefix}_key_id <> $1`,
    [box.keyId],
  );
  for (const row of rows) {
    const place = placeOf({ id: row.id, organizationId: row.organization_id, mode: row.mode });
    const sealed = box.seal(place, box.open(place, { keyId: row.key_id, nonce: row.nonce, ciphertext: row.ciphertext }));
    await db.query(
      `UPDATE ${table} SET ${prefix}_key_id = $2, ${prefix}_nonce = $3, ${prefix}_ciphertext = $4 WHERE id = $1 AND ${prefix}_key_id = $5`,
      [row.id, sealed.keyId, sealed.nonce, sealed.ciphertext, row.key_id],
    );
  }
  return rows.length;
}
