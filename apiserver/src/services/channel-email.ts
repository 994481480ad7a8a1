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
