/**
 * The providers' wire formats for channel replies: Slack's Web API `chat.postMessage` and
 * SendGrid's v3 `mail/send`. Each throws when the provider does not take the reply.
 */

/** Posts a reply with `chat.postMessage`; throws with Slack's error when it refuses. */
export async function postSlackMessage(
  apiUrl: string,
  botToken: string,
  message: { channel: string; text: string; threadTs?: string | undefined; username?: string | undefined },
): Promise<void> {
  const response = await fetch(`${apiUrl.replace(/\/+$/, '')}/chat.postMessage`, {
    method: 'POST',
    headers: { authorization: `Bearer ${botToken}`, 'content-type': 'application/json; charset=utf-8' },
    body: JSON.stringify({
      channel: message.channel,
      text: message.text,
      ...(message.threadTs ? { thread_ts: message.threadTs } : {}),
      ...(message.username ? { username: message.username } : {}),
    }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await response.json().catch(() => ({}))) as { ok?: boolean; error?: string };
  if (!response.ok || body.ok !== true) throw new Error(`Slack chat.postMessage answered ${response.status}: ${body.error ?? 'no error given'}`);
}

/** The subject of a reply: `Re: ` once. */
export function replySubject(subject: string | null | undefined): string {
  if (!subject) return 'Re: your message';
  return /^re:/i.test(subject) ? subject : `Re: ${subject}`;
}

/** Sends a plain-text mail with SendGrid's v3 `mail/send` (202 when accepted). */
export async function sendGridMail(
  apiUrl: string,
  apiKey: string,
  mail: { from: string; to: string; subject: string; text: string; inReplyTo?: string | null | undefined },
): Promise<void> {
  const response = await fetch(`${apiUrl.replace(/\/+$/, '')}/v3/mail/send`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      personalizations: [{ to: [{ email: mail.to }] }],
      from: { email: mail.from },
      subject: mail.subject,
      content: [{ type: 'text/plain', value: mail.text }],
      ...(mail.inReplyTo ? { headers: { 'In-Reply-To': mail.inReplyTo, References: mail.inReplyTo } } : {}),
    }),
    signal: AbortSignal.timeout(10_000),
  });
  if (response.status !== 202 && response.status !== 200) {
    throw new Error(`SendGrid mail/send answered ${response.status}: ${(await response.text().catch(() => '')).slice(0, 300)}`);
  }
}
