import { simpleParser } from 'mailparser';

/** An inbound email, as the JSON webhook takes it and as a raw message is read into. */
export interface InboundEmail {
  from: string;
  subject: string | undefined;
  text: string;
  messageId: string | undefined;
}

/** Text beyond this is cut before it reaches the agent (quoted history of long threads). */
export const MAX_EMAIL_TEXT = 16_000;

/**
 * Reads a raw RFC 5322 message with mailparser: the sender, subject, Message-ID and text
 * (mailparser makes it from the HTML part when there is no text part).
 */
export async function parseRawEmail(raw: Buffer): Promise<Partial<InboundEmail> & { to: string | undefined }> {
  const parsed = await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true });
  const text = parsed.text;
  return {
    ...(parsed.from?.value[0]?.address ? { from: parsed.from.value[0].address } : {}),
    to: (Array.isArray(parsed.to) ? parsed.to : parsed.to ? [parsed.to] : []).flatMap((to) => to.value.map((one) => one.address ?? '')).join(', ') || undefined,
    subject: parsed.subject,
    ...(text !== undefined ? { text } : {}),
    messageId: parsed.messageId,
  };
}

/** The subject of a reply: `Re: ` once. */
export function replySubject(subject: string | undefined): string {
  if (!subject) return 'Re: your message';
  return /^re:/i.test(subject) ? subject : `Re: ${subject}`;
}

/** Sends a plain-text mail with SendGrid's v3 `mail/send` (202 when accepted). */
export async function sendGridMail(
  apiUrl: string,
  apiKey: string,
  mail: { from: string; to: string; subject: string; text: string; inReplyTo?: string | undefined },
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
