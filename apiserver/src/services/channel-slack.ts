import { createHmac, timingSafeEqual } from 'node:crypto';

/** Slack's own tolerance: a request signed more than five minutes from now is refused. */
export const SLACK_TOLERANCE_SECONDS = 300;
export const SLACK_SIGNATURE_HEADER = 'x-slack-signature';
export const SLACK_TIMESTAMP_HEADER = 'x-slack-request-timestamp';

export type SlackSignatureProblem = 'missing_signature' | 'bad_signature' | 'bad_timestamp' | 'stale_timestamp';

/**
 * Slack's request signature (v0): `v0=` and the hex HMAC-SHA256 of `v0:<timestamp>:<raw body>`
 * keyed by the app's signing secret. Compared in constant time, also when malformed; the
 * timestamp must be within SLACK_TOLERANCE_SECONDS of `now` either way.
 */
export function checkSlackSignature(
  signingSecret: string,
  body: Buffer,
  headers: { signature: string | undefined; timestamp: string | undefined },
  now: Date,
): SlackSignatureProblem | undefined {
  if (!headers.signature || !headers.timestamp) return 'missing_signature';
  if (!/^\d{1,12}$/.test(headers.timestamp)) return 'bad_timestamp';
  const expected = createHmac('sha256', signingSecret).update(`v0:${headers.timestamp}:`).update(body).digest();
  const hex = /^v0=([0-9a-f]{64})$/.exec(headers.signature.trim().toLowerCase())?.[1];
  const received = Buffer.from(hex ?? '00'.repeat(32), 'hex');
  if (!(timingSafeEqual(expected, received) && hex !== undefined)) return 'bad_signature';
  if (Math.abs(now.getTime() / 1000 - Number(headers.timestamp)) > SLACK_TOLERANCE_SECONDS) return 'stale_timestamp';
  return undefined;
}

/** The signature a Slack app would send (for documentation examples and tests). */
export function signSlackRequest(signingSecret: string, timestamp: string, body: string): string {
  return `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
}

/** The fields of an Events API `message` (or `app_mention`) event that Berth reads. */
export interface SlackMessageEvent {
  type: string;
  subtype?: string;
  bot_id?: string;
  user?: string;
  text?: string;
  channel?: string;
  channel_type?: string;
  ts?: string;
  thread_ts?: string;
}

/**
 * Where a Slack message's conversation is: a direct message channel is one conversation; in a
 * channel, each thread (a top-level message starts one) is.
 */
export function slackConversationOf(event: SlackMessageEvent): { visitorId: string; replyTo: { channel: string; threadTs?: string } } {
  const channel = event.channel!;
  if (event.channel_type === 'im' && !event.thread_ts) return { visitorId: `slack:${channel}`, replyTo: { channel } };
  const threadTs = event.thread_ts ?? event.ts!;
  return { visitorId: `slack:${channel}:${threadTs}`, replyTo: { channel, threadTs } };
}
