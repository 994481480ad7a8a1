import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';

/** The sign-in session: a random token, signed, http-only. */
export const SESSION_COOKIE = 'berth_session';
/** The CSRF token of the session, readable by the dashboard's script so that it can echo it in `X-CSRF-Token`. */
export const CSRF_COOKIE = 'berth_csrf';
/** State, nonce and PKCE verifier between the redirect to the identity provider and its callback. */
export const OIDC_COOKIE = 'berth_oidc';
export const CSRF_HEADER = 'x-csrf-token';

/** Cookie values signed with HMAC-SHA256: a changed value is refused before the database is asked. */
export class CookieSigner {
  constructor(private readonly key: Buffer) {}

  sign(value: string): string {
    return `${value}.${this.mac(value)}`;
  }

  /** The value of a signed cookie, or undefined when the signature does not match. */
  verify(signed: string | undefined): string | undefined {
    if (!signed) return undefined;
    const dot = signed.lastIndexOf('.');
    if (dot <= 0) return undefined;
    const value = signed.slice(0, dot);
    const given = Buffer.from(signed.slice(dot + 1));
    const expected = Buffer.from(this.mac(value));
    return given.length === expected.length && timingSafeEqual(given, expected) ? value : undefined;
  }

  private mac(value: string): string {
    return createHmac('sha256', this.key).update(value).digest('base64url');
  }
}

/** Reads one cookie of the request (no cookie parser middleware: only /api reads cookies). */
export function readCookie(req: Request, name: string): string | undefined {
  const header = req.get('cookie');
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

export interface CookieOptions {
  /** `Secure`: set when the dashboard is served over https. */
  secure: boolean;
}

export function setCookie(
  res: Response,
  name: string,
  value: string,
  options: CookieOptions & { httpOnly: boolean; path: string; maxAgeMs: number },
): void {
  res.cookie(name, value, {
    httpOnly: options.httpOnly,
    secure: options.secure,
    sameSite: 'lax',
    path: options.path,
    maxAge: options.maxAgeMs,
  });
}

export function clearCookie(res: Response, name: string, options: CookieOptions & { httpOnly: boolean; path: string }): void {
  res.clearCookie(name, { httpOnly: options.httpOnly, secure: options.secure, sameSite: 'lax', path: options.path });
}

/** Constant-time string comparison for tokens. */
export function sameToken(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
