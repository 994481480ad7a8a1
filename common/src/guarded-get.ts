import http from 'node:http';
import https from 'node:https';
import { guardedLookup } from './webhook-post.js';
import { isPrivateAddress, webhookUrlProblem, type UrlPolicy } from './webhooks.js';

/**
 * A GET of a URL a customer gave (a knowledge source), under the rules of outbound webhooks:
 * https unless the install allows http, no private, loopback or link-local address (checked on
 * the address connected to, after DNS), a time limit and a size limit. Redirects are followed
 * a few times, each target checked the same way.
 */
export interface GuardedGetResult {
  ok: boolean;
  body?: Buffer;
  contentType?: string;
  error?: string;
}

const MAX_REDIRECTS = 3;

export async function guardedGet(url: string, policy: UrlPolicy, limits: { maxBytes: number; timeoutMs: number }): Promise<GuardedGetResult> {
  let target = url;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const problem = webhookUrlProblem(target, policy);
    if (problem) return { ok: false, error: `${target} ${problem}` };
    const answer = await getOnce(new URL(target), policy.allowPrivate, limits);
    if (!('redirect' in answer)) return answer;
    target = new URL(answer.redirect, target).toString();
  }
  return { ok: false, error: `more than ${MAX_REDIRECTS} redirects` };
}

function getOnce(target: URL, allowPrivate: boolean, limits: { maxBytes: number; timeoutMs: number }): Promise<GuardedGetResult | { redirect: string }> {
  const literal = target.hostname.replace(/^\[|\]$/g, '');
  if (!allowPrivate && isPrivateAddress(literal)) return Promise.resolve({ ok: false, error: `${literal} is a private address this install does not connect to` });
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: GuardedGetResult | { redirect: string }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const request = client.get(target, { headers: { 'user-agent': 'Berth-Knowledge/1', accept: 'text/*, application/json;q=0.9, */*;q=0.1' }, lookup: guardedLookup(allowPrivate) }, (response) => {
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400 && response.headers.location) {
        response.resume();
        done({ redirect: response.headers.location });
        return;
      }
      if (status < 200 || status >= 300) {
        response.resume();
        done({ ok: false, error: `answered ${status}` });
        return;
      }
      const parts: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > limits.maxBytes) {
          done({ ok: false, error: `the document is larger than ${limits.maxBytes} bytes` });
          request.destroy();
          return;
        }
        parts.push(chunk);
      });
      response.on('end', () => done({ ok: true, body: Buffer.concat(parts), contentType: response.headers['content-type'] ?? '' }));
      response.on('error', (error) => done({ ok: false, error: error.message }));
    });
    const timer = setTimeout(() => {
      done({ ok: false, error: `no answer within ${limits.timeoutMs / 1000} s` });
      request.destroy();
    }, limits.timeoutMs);
    request.on('error', (error) => done({ ok: false, error: error.message }));
  });
}
