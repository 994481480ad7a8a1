import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { reencryptSealedColumns, type SecretBox, type SecretPlace } from './secrets.js';

/**
 * Inbound webhook triggers: `POST /triggers/:id/fire` carries `x-trigger-signature`, the
 * lowercase hex HMAC-SHA256 of the raw body keyed by the trigger's secret (`sha256=` before it
 * is accepted). A sender that also sends `x-trigger-timestamp` (Unix seconds) signs
 * `<timestamp>.<raw body>` instead, and gets replay protection: a request whose timestamp is
 * outside the tolerance window, or that was accepted once already, is refused.
 */
export const TRIGGER_SIGNATURE_HEADER = 'x-trigger-signature';
export const TRIGGER_TIMESTAMP_HEADER = 'x-trigger-timestamp';
/** How far a signed timestamp may be from the server's clock, either way. */
export const TRIGGER_TOLERANCE_SECONDS = 300;
/** The largest body a fire accepts. */
export const MAX_TRIGGER_BODY_BYTES = 256 * 1024;

const SIGNATURE_PATTERN = /^(?:sha256=)?([0-9a-f]{64})$/;
const TIMESTAMP_PATTERN = /^[0-9]{1,12}$/;

export function generateTriggerSecret(): string {
  return `trgsec_${randomBytes(32).toString('base64url')}`;
}

/** The bytes a sender signs: the raw body, or `<timestamp>.` and the raw body. */
function signedContent(body: Buffer, timestamp: string | undefined): Buffer {
  return timestamp === undefined ? body : Buffer.concat([Buffer.from(`${timestamp}.`), body]);
}

/** What a sender puts in `x-trigger-signature` (lowercase hex, no prefix). */
export function signTriggerBody(secret: string, body: string | Buffer, timestamp?: string): string {
  return createHmac('sha256', secret)
    .update(signedContent(Buffer.from(body), timestamp))
    .digest('hex');
}

export type SignatureProblem =
  /** No x-trigger-signature. */
  | 'missing_signature'
  /** Not the HMAC of what was sent, or not 64 hex digits. */
  | 'bad_signature'
  /** x-trigger-timestamp that is not Unix seconds. */
  | 'bad_timestamp'
  /** A correctly signed timestamp outside the tolerance window. */
  | 'stale_timestamp';

export type SignatureCheck =
  | { ok: true; digest: Buffer; signedAt: Date | undefined }
  | { ok: false; problem: SignatureProblem };

/**
 * Checks a fire's signature in constant time (the digests are compared, never the text), then
 * the signed timestamp's window. `digest` is what a timestamped request is remembered by, to
 * refuse its replay.
 */
export function checkTriggerSignature(
  secret: string,
  body: Buffer,
  headers: { signature: string | undefined; timestamp: string | undefined },
  now: Date,
  toleranceSeconds = TRIGGER_TOLERANCE_SECONDS,
): SignatureCheck {
  if (headers.signature === undefined || headers.signature.trim() === '') return { ok: false, problem: 'missing_signature' };
  const { timestamp } = headers;
  if (timestamp !== undefined && !TIMESTAMP_PATTERN.test(timestamp.trim())) return { ok: false, problem: 'bad_timestamp' };
  const signedTimestamp = timestamp?.trim();
  const expected = createHmac('sha256', secret).update(signedContent(body, signedTimestamp)).digest();
  const hex = SIGNATURE_PATTERN.exec(headers.signature.trim().toLowerCase())?.[1];
  const received = Buffer.from(hex ?? '00'.repeat(32), 'hex');
  // Compared even when the header was malformed, so that its shape does not change the time taken.
  const matches = timingSafeEqual(expected, received) && hex !== undefined;
  if (!matches) return { ok: false, problem: 'bad_signature' };
  if (signedTimestamp === undefined) return { ok: true, digest: expected, signedAt: undefined };
  const signedAt = new Date(Number(signedTimestamp) * 1000);
  if (Math.abs(now.getTime() - signedAt.getTime()) > toleranceSeconds * 1000) return { ok: false, problem: 'stale_timestamp' };
  return { ok: true, digest: expected, signedAt };
}

export interface SealedTriggerSecret {
  keyId: string;
  nonce: Buffer;
  ciphertext: Buffer;
}

/** Where a trigger's secret is sealed: its own place, so the ciphertext opens for that trigger only. */
export const triggerSecretPlace = (trigger: { organizationId: string; mode: Mode; id: string }): SecretPlace => ({
  organizationId: trigger.organizationId,
  mode: trigger.mode,
  scope: trigger.id,
  name: 'trigger-signing-secret',
});

/** Re-encrypts every trigger secret not under the current key (`berth secrets rotate`); returns how many. */
export function reencryptTriggerSecrets(db: Queryable, box: SecretBox): Promise<number> {
  return reencryptSealedColumns(db, box, { table: 'triggers', prefix: 'secret' }, triggerSecretPlace);
}
