import { createHmac, timingSafeEqual } from 'node:crypto';
import { BerthError } from './errors.js';

/** The header Berth signs each webhook delivery with, and the one that names the delivery. */
export const SIGNATURE_HEADER = 'x-svc-signature';
export const DELIVERY_HEADER = 'x-svc-delivery';

/** `sha256=` and the lowercase hex HMAC-SHA256 of the raw body, keyed by the webhook's secret. */
export function signWebhookPayload(secret: string, rawBody: string | Uint8Array): string {
  return `sha256=${createHmac('sha256', secret).update(rawBody).digest('hex')}`;
}

/**
 * True when `signature` (the X-Svc-Signature header) is Berth's signature of `rawBody` under
 * `secret`, compared in constant time. Pass the body exactly as received, before any JSON parsing.
 */
export function verifyWebhookSignature(secret: string, rawBody: string | Uint8Array, signature: string | null | undefined): boolean {
  if (!signature) return false;
  const expected = Buffer.from(signWebhookPayload(secret, rawBody));
  const received = Buffer.from(signature.trim());
  return expected.length === received.length && timingSafeEqual(expected, received);
}

/** A delivery's envelope, `{ id, event, createdAt, data }`. */
export interface WebhookEvent {
  id: string;
  event: string;
  createdAt: string;
  data: Record<string, unknown>;
}

/** Verifies the signature and parses the envelope; throws BerthError when the signature does not match. */
export function parseWebhookEvent(secret: string, rawBody: string | Uint8Array, signature: string | null | undefined): WebhookEvent {
  if (!verifyWebhookSignature(secret, rawBody, signature)) throw new BerthError('the webhook signature does not match its body');
  return JSON.parse(typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody)) as WebhookEvent;
}
