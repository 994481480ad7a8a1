import type { Request } from 'express';

/** The origin a request was sent to, when its Host header names one; undefined otherwise. */
export function requestOrigin(req: Pick<Request, 'protocol' | 'get'>): string | undefined {
  const host = req.get('host');
  if (!host) return undefined;
  try {
    const url = new URL(`${req.protocol}://${host}`);
    return url.host === host.toLowerCase() ? url.origin : undefined;
  } catch {
    return undefined;
  }
}
