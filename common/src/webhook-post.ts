import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { DELIVERY_TIMEOUT_MS, isPrivateAddress } from './webhooks.js';

/**
 * Sending one webhook: the operator's sender uses it for every delivery attempt, the API
 * server for a test delivery. Signing and retries are the callers' (see webhooks.ts and the
 * operator's sender); this module only posts, refusing private addresses unless allowed.
 */

export interface AttemptResult {
  ok: boolean;
  status?: number;
  error?: string;
  durationMs: number;
}

const RESPONSE_EXCERPT_BYTES = 512;

/**
 * A DNS lookup that refuses private addresses: the address checked is the one connected to,
 * so a name cannot resolve to a public address when registered and a private one when used.
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses as LookupAddress[];
      const refused = allowPrivate ? undefined : list.find((entry) => isPrivateAddress(entry.address));
      if (refused) {
        const denied = Object.assign(new Error(`${hostname} resolves to ${refused.address}, a private address this install does not deliver to`), {
          code: 'EPRIVATE',
        });
        return callback(denied, '', 0);
      }
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      const first = list[0]!;
      callback(null, first.address, first.family);
    });
  };
}

/** One POST of a payload: 2xx within 10 s is delivered; anything else is an error to retry. */
export function postWebhook(url: string, body: string, headers: Record<string, string>, allowPrivate: boolean): Promise<AttemptResult> {
  const started = performance.now();
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  const literal = target.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: Omit<AttemptResult, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, durationMs: Math.round(performance.now() - started) });
    };
    if (!allowPrivate && isPrivateAddress(literal)) {
      done({ ok: false, error: `${literal} is a private address this install does not deliver to` });
      return;
    }
    const request = client.request(
      target,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body).toString(), 'user-agent': 'Berth-Webhooks/1', ...headers },
        lookup: guardedLookup(allowPrivate),
      },
      (response) => {
        let excerpt = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          if (excerpt.length < RESPONSE_EXCERPT_BYTES) excerpt += chunk;
        });
        response.on('end', () => {
          const status = response.statusCode ?? 0;
          if (status >= 200 && status < 300) done({ ok: true, status });
          else done({ ok: false, status, error: `answered ${status}${excerpt ? `: ${excerpt.slice(0, RESPONSE_EXCERPT_BYTES).trim()}` : ''}` });
        });
        response.on('error', (error) => done({ ok: false, status: response.statusCode, error: error.message }));
      },
    );
    const timer = setTimeout(() => {
      done({ ok: false, error: `no answer within ${DELIVERY_TIMEOUT_MS / 1000} s` });
      request.destroy();
    }, DELIVERY_TIMEOUT_MS);
    request.on('error', (error) => done({ ok: false, error: error.message }));
    request.end(body);
  });
}
