import { describe, expect, it } from 'vitest';
import { parseWebhookEvent, signWebhookPayload, verifyWebhookSignature } from './webhook-signature.js';

// HMAC-SHA256 of the body under the key, computed apart from this code (Python's hmac module).
const SECRET = 'whsec_example';
const BODY = '{"id":"evt_1","event":"agent.completed"}';
const SIGNATURE = 'sha256=3c94a8f2d36c551d034b3a95c7aa3f80d5c77cb59ef7773c281f93b19e2e185f';

describe('webhook signatures', () => {
  it('signs as the server does: sha256= and the lowercase hex HMAC of the raw body', () => {
    expect(signWebhookPayload(SECRET, BODY)).toBe(SIGNATURE);
    expect(signWebhookPayload(SECRET, new TextEncoder().encode(BODY))).toBe(SIGNATURE);
  });

  it('accepts the right signature and refuses every other', () => {
    expect(verifyWebhookSignature(SECRET, BODY, SIGNATURE)).toBe(true);
    expect(verifyWebhookSignature(SECRET, Buffer.from(BODY), SIGNATURE)).toBe(true);
    expect(verifyWebhookSignature('whsec_other', BODY, SIGNATURE)).toBe(false);
    expect(verifyWebhookSignature(SECRET, `${BODY} `, SIGNATURE)).toBe(false);
    expect(verifyWebhookSignature(SECRET, BODY, SIGNATURE.toUpperCase())).toBe(false);
    expect(verifyWebhookSignature(SECRET, BODY, SIGNATURE.slice(0, -1))).toBe(false);
    expect(verifyWebhookSignature(SECRET, BODY, SIGNATURE.replace('sha256=', ''))).toBe(false);
    expect(verifyWebhookSignature(SECRET, BODY, undefined)).toBe(false);
    expect(verifyWebhookSignature(SECRET, BODY, '')).toBe(false);
  });

  it('parses a verified delivery and throws on a forged one', () => {
    expect(parseWebhookEvent(SECRET, BODY, SIGNATURE)).toEqual({ id: 'evt_1', event: 'agent.completed' });
    expect(() => parseWebhookEvent(SECRET, BODY.replace('evt_1', 'evt_2'), SIGNATURE)).toThrow(/does not match/);
  });
});
