import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Principal } from '@berth/common';
import { z } from 'zod';

/**
 * envd access tokens: the sandbox routes (`X-Access-Token`) carry no API key, so the token names
 * the sandbox and the key that created or connected it, signed by the install. Stateless: any
 * replica can check one; the key is looked up again on each use, so revoking it ends the token.
 */
const payloadSchema = z.object({ s: z.string(), o: z.string(), m: z.enum(['live', 'test']), k: z.string() });

export class EnvdTokens {
  constructor(private readonly key: Buffer) {}

  issue(principal: Principal, sandboxId: string): string {
    const payload = Buffer.from(JSON.stringify({ s: sandboxId, o: principal.organizationId, m: principal.mode, k: principal.keyId })).toString('base64url');
    return `envd_${payload}.${this.sign(payload)}`;
  }

  /** The principal the token was issued to, when it is valid for `sandboxId`. */
  verify(token: string, sandboxId: string): Principal | undefined {
    const [payload, signature, ...rest] = token.startsWith('envd_') ? token.slice(5).split('.') : [];
    if (!payload || !signature || rest.length > 0) return undefined;
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(signature);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    let parsed: z.infer<typeof payloadSchema>;
    try {
      parsed = payloadSchema.parse(JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')));
    } catch {
      return undefined;
    }
    if (parsed.s !== sandboxId) return undefined;
    return { organizationId: parsed.o, mode: parsed.m, keyId: parsed.k };
  }

  private sign(payload: string): string {
    return createHmac('sha256', this.key).update('envd\n').update(payload).digest('base64url');
  }
}
