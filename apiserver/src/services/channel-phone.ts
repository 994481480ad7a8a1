import { createHmac, timingSafeEqual } from 'node:crypto';

export const TWILIO_SIGNATURE_HEADER = 'x-twilio-signature';

/**
 * Twilio's request signature: base64 HMAC-SHA1, keyed by the auth token, of the full URL it
 * requested followed by each POST parameter's name and value, sorted by name.
 */
export function twilioSignature(authToken: string, url: string, params: URLSearchParams): string {
  const names = [...new Set(params.keys())].sort();
  let data = url;
  for (const name of names) for (const value of params.getAll(name)) data += name + value;
  return createHmac('sha1', authToken).update(data).digest('base64');
}

export function checkTwilioSignature(authToken: string, url: string, params: URLSearchParams, signature: string | undefined): boolean {
  if (!signature) return false;
  const expected = Buffer.from(twilioSignature(authToken, url, params));
  const received = Buffer.from(signature);
  return expected.length === received.length && timingSafeEqual(expected, received);
}

function xmlText(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

/** TwiML that speaks `say` with `voice` and then listens for the caller's next words, posting them to `action`. */
export function speakAndListen(say: string, voice: string, action: string): string {
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Response><Say voice="${xmlText(voice)}">${xmlText(say)}</Say>` +
    `<Gather input="speech" action="${xmlText(action)}" method="POST" speechTimeout="auto"/></Response>`
  );
}
