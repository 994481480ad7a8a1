import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import type { EventType } from './events.js';

/** The events a webhook can subscribe to: the spec's table, as far as Berth writes them. */
export const WEBHOOK_EVENTS = [
  'agent.started',
  'agent.completed',
  'agent.failed',
  'agent.paused',
  'agent.restarted',
  'agent.terminated',
  'agent.run.completed',
  'session.limit_reached',
  'session.cost_threshold',
  'budget.threshold',
  'budget.exhausted',
  'fleet.started',
  'fleet.item_completed',
  'fleet.completed',
  'fleet.cost_limited',
  'schedule.fired',
  'trigger.fired',
  'workflow.started',
  'workflow.step_completed',
  'workflow.completed',
  'workflow.failed',
  'knowledge.sync_completed',
  'knowledge.sync_failed',
  'approval.requested',
  'approval.approved',
  'approval.denied',
  'approval.expired',
] as const satisfies readonly EventType[];

/** A delivery answered 2xx within this is delivered. */
export const DELIVERY_TIMEOUT_MS = 10_000;

/** Waits before the retries after a failed attempt: 3 retries, then the delivery has failed. */
export const RETRY_DELAYS_MS = [5_000, 30_000, 300_000] as const;

/** Ranges a webhook may not reach unless the install allows private addresses. */
const PRIVATE = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  PRIVATE.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8],
] as const) {
  PRIVATE.addSubnet(network, prefix, 'ipv6');
}

/** Whether an IP address is private, loopback, link-local or otherwise not on the internet. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return PRIVATE.check(address, 'ipv4');
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return PRIVATE.check(mapped[1]!, 'ipv4');
    return PRIVATE.check(address, 'ipv6');
  }
  return false;
}

export interface UrlPolicy {
  allowHttp: boolean;
  allowPrivate: boolean;
}

/** Why a webhook URL is refused, or undefined. Hostnames are checked again after DNS resolution, at delivery. */
export function webhookUrlProblem(text: string, policy: UrlPolicy): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute URL';
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowHttp)) {
    return policy.allowHttp ? 'must be an http or https URL' : 'must be an https URL (this install does not allow http)';
  }
  if (url.username || url.password) return 'must not carry credentials; use the signing secret';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!policy.allowPrivate && (host === 'localhost' || host.endsWith('.localhost') || isPrivateAddress(host))) {
    return 'points at a private, loopback or link-local address, which this install does not allow';
  }
  return undefined;
}

/** `sha256=<lowercase hex HMAC-SHA256 of the raw body>`, the X-Svc-Signature header. */
export function signPayload(secret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** What a receiver does: recompute the signature and compare in constant time. */
export function verifySignature(secret: string, body: string | Buffer, header: string | undefined): boolean {
  if (!header) return false;
  const expected = Buffer.from(signPayload(secret, body));
  const received = Buffer.from(header);
  return expected.length === received.length && timingSafeEqual(expected, received);
}

/** A signing secret for a webhook registered without one. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64url')}`;
}

/**
 * Secrets are shown in full once; after that, their first 8 characters (code points: a cut through
 * a surrogate pair would answer a string that is not Unicode).
 */
export function maskSecret(secret: string): string {
  return `${Array.from(secret).slice(0, 8).join('')}…`;
}

/**
 * Why a URL's host may not be reached by this install (it resolves to a private, loopback or
 * link-local address), or undefined. For clients that cannot pin the address they connect to:
 * a check before the request.
 */
export async function privateHostProblem(url: string, allowPrivate: boolean): Promise<string | undefined> {
  if (allowPrivate) return undefined;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) return isPrivateAddress(host) ? `${host} is a private address this install does not connect to` : undefined;
  let addresses: { address: string }[];
  try {
    addresses = await lookup(host, { all: true });
  } catch (error) {
    return `${host} does not resolve: ${(error as Error).message}`;
  }
  const inside = addresses.find((entry) => isPrivateAddress(entry.address));
  return inside ? `${host} resolves to ${inside.address}, a private address this install does not connect to` : undefined;
}
