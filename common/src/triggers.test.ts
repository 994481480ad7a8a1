import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox } from './secrets.js';
import { TRIGGER_TOLERANCE_SECONDS, checkTriggerSignature, generateTriggerSecret, signTriggerBody, triggerSecretPlace } from './triggers.js';

const secret = 'trgsec_known-secret-for-the-table';
const body = Buffer.from('{"ticket":4711}');
const now = new Date('2026-11-23T12:00:00Z');
const seconds = (date: Date) => String(Math.floor(date.getTime() / 1000));
/** What any sender computes with its own HMAC library. */
const hmac = (content: string) => createHmac('sha256', secret).update(content).digest('hex');

describe('trigger signatures', () => {
  const cases: { what: string; signature: string | undefined; timestamp?: string; result: string }[] = [
    { what: 'bare lowercase hex of the body', signature: hmac(body.toString()), result: 'ok' },
    { what: 'with the sha256= prefix', signature: `sha256=${hmac(body.toString())}`, result: 'ok' },
    { what: 'uppercase hex', signature: hmac(body.toString()).toUpperCase(), result: 'ok' },
    { what: 'no header', signature: undefined, result: 'missing_signature' },
    { what: 'an empty header', signature: '  ', result: 'missing_signature' },
    { what: 'the HMAC of another body', signature: hmac('{"ticket":4712}'), result: 'bad_signature' },
    { what: 'keyed by another secret', signature: createHmac('sha256', 'another').update(body).digest('hex'), result: 'bad_signature' },
    { what: 'cut short', signature: hmac(body.toString()).slice(0, 63), result: 'bad_signature' },
    { what: 'not hex', signature: 'z'.repeat(64), result: 'bad_signature' },
    { what: 'another prefix', signature: `sha1=${hmac(body.toString())}`, result: 'bad_signature' },
    { what: 'a timestamp signed with the body', signature: hmac(`${seconds(now)}.${body}`), timestamp: seconds(now), result: 'ok' },
    { what: 'a timestamp sent but only the body signed', signature: hmac(body.toString()), timestamp: seconds(now), result: 'bad_signature' },
    { what: 'a timestamp that is not Unix seconds', signature: hmac(`2026-11-23.${body}`), timestamp: '2026-11-23', result: 'bad_timestamp' },
    {
      what: 'a timestamp just inside the window',
      signature: hmac(`${Number(seconds(now)) - TRIGGER_TOLERANCE_SECONDS}.${body}`),
      timestamp: String(Number(seconds(now)) - TRIGGER_TOLERANCE_SECONDS),
      result: 'ok',
    },
    {
      what: 'a timestamp too old',
      signature: hmac(`${Number(seconds(now)) - TRIGGER_TOLERANCE_SECONDS - 1}.${body}`),
      timestamp: String(Number(seconds(now)) - TRIGGER_TOLERANCE_SECONDS - 1),
      result: 'stale_timestamp',
    },
    {
      what: 'a timestamp in the future beyond the window',
      signature: hmac(`${Number(seconds(now)) + TRIGGER_TOLERANCE_SECONDS + 1}.${body}`),
      timestamp: String(Number(seconds(now)) + TRIGGER_TOLERANCE_SECONDS + 1),
      result: 'stale_timestamp',
    },
    { what: 'a stale timestamp with a wrong signature', signature: hmac(body.toString()), timestamp: '1000', result: 'bad_signature' },
  ];

  it.each(cases)('$what: $result', ({ signature, timestamp, result }) => {
    const check = checkTriggerSignature(secret, body, { signature, timestamp }, now);
    expect(check.ok ? 'ok' : check.problem).toBe(result);
  });

  it('gives the signing time of a timestamped request and the digest it is remembered by', () => {
    const check = checkTriggerSignature(secret, body, { signature: signTriggerBody(secret, body, seconds(now)), timestamp: seconds(now) }, now);
    expect(check).toEqual({ ok: true, signedAt: now, digest: Buffer.from(hmac(`${seconds(now)}.${body}`), 'hex') });
    const plain = checkTriggerSignature(secret, body, { signature: signTriggerBody(secret, body), timestamp: undefined }, now);
    expect(plain).toMatchObject({ ok: true, signedAt: undefined });
  });

  it('signs the bytes as they are, not a re-encoding of them', () => {
    const latin = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xe9, 0x22, 0x7d]); // {"a":"é"} in Latin-1
    const signature = createHmac('sha256', secret).update(latin).digest('hex');
    expect(checkTriggerSignature(secret, latin, { signature, timestamp: undefined }, now).ok).toBe(true);
    expect(signTriggerBody(secret, latin)).toBe(signature);
  });
});

describe('trigger secrets', () => {
  it('are long and random', () => {
    const a = generateTriggerSecret();
    expect(a).toMatch(/^trgsec_[A-Za-z0-9_-]{43}$/);
    expect(generateTriggerSecret()).not.toBe(a);
  });

  it('are sealed for one trigger: a ciphertext moved to another does not open', () => {
    const box = new SecretBox(randomBytes(32));
    const place = triggerSecretPlace({ organizationId: 'org_1', mode: 'live', id: 'trg_a' });
    const sealed = box.seal(place, 'trgsec_value');
    expect(box.open(place, sealed)).toBe('trgsec_value');
    expect(() => box.open(triggerSecretPlace({ organizationId: 'org_1', mode: 'live', id: 'trg_b' }), sealed)).toThrow(/does not decrypt/);
  });
});
