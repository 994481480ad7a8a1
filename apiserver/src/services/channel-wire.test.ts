import { describe, expect, it } from 'vitest';
import { replySubject } from '@berth/operator';
import { parseRawEmail } from './channel-email.js';
import { checkTwilioSignature, speakAndListen, twilioSignature } from './channel-phone.js';
import { checkSlackSignature, signSlackRequest, slackConversationOf } from './channel-slack.js';

/** The providers' wire formats, against the examples in their own documentation. */
describe('Slack request signatures', () => {
  // Slack's "Verifying requests from Slack" example: secret, timestamp, body and signature as published.
  const secret = '8f742231b10e8888abcd99yyyzzz85a5';
  const timestamp = '1531420618';
  const body =
    'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
  const signature = 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503';
  const at = (seconds: number) => new Date(seconds * 1000);

  it('computes the published signature', () => {
    expect(signSlackRequest(secret, timestamp, body)).toBe(signature);
  });

  it.each([
    ['the published request, 10 s later', signature, timestamp, body, 1531420628, undefined],
    ['upper-case hex', signature.toUpperCase().replace('V0=', 'v0='), timestamp, body, 1531420618, undefined],
    ['300 s early', signature, timestamp, body, 1531420318, undefined],
    ['a changed body', signature, timestamp, `${body}&x=1`, 1531420618, 'bad_signature'],
    ['another timestamp', signature, '1531420619', body, 1531420618, 'bad_signature'],
    ['no v0= prefix', signature.slice(3), timestamp, body, 1531420618, 'bad_signature'],
    ['a short signature', 'v0=abc', timestamp, body, 1531420618, 'bad_signature'],
    ['no signature', undefined, timestamp, body, 1531420618, 'missing_signature'],
    ['no timestamp', signature, undefined, body, 1531420618, 'missing_signature'],
    ['a timestamp that is not a number', signature, '15314e0618', body, 1531420618, 'bad_timestamp'],
    ['301 s later', signature, timestamp, body, 1531420919, 'stale_timestamp'],
  ])('%s', (_name, sent, stamp, content, now, problem) => {
    expect(checkSlackSignature(secret, Buffer.from(content), { signature: sent, timestamp: stamp }, at(now))).toBe(problem);
  });

  it('puts a channel message in its thread and a direct message in its DM', () => {
    expect(slackConversationOf({ type: 'message', channel: 'C1', ts: '1.1' })).toEqual({ visitorId: 'slack:C1:1.1', replyTo: { channel: 'C1', threadTs: '1.1' } });
    expect(slackConversationOf({ type: 'message', channel: 'C1', ts: '2.2', thread_ts: '1.1' })).toEqual({ visitorId: 'slack:C1:1.1', replyTo: { channel: 'C1', threadTs: '1.1' } });
    expect(slackConversationOf({ type: 'message', channel: 'D1', channel_type: 'im', ts: '3.3' })).toEqual({ visitorId: 'slack:D1', replyTo: { channel: 'D1' } });
  });
});

describe('Twilio request signatures', () => {
  // Twilio's "Webhooks security" example: auth token 12345 and the published signature.
  const url = 'https://mycompany.com/myapp.php?foo=1&bar=2';
  const params = new URLSearchParams({ CallSid: 'CA1234567890ABCDE', Caller: '+12349013030', Digits: '1234', From: '+12349013030', To: '+18005551212' });

  it('computes the published signature and checks it', () => {
    expect(twilioSignature('12345', url, params)).toBe('0/KCTR6DLpKmkAf8muzZqo1nDgQ=');
    expect(checkTwilioSignature('12345', url, params, '0/KCTR6DLpKmkAf8muzZqo1nDgQ=')).toBe(true);
    expect(checkTwilioSignature('12345', url.replace('foo=1', 'foo=2'), params, '0/KCTR6DLpKmkAf8muzZqo1nDgQ=')).toBe(false);
    expect(checkTwilioSignature('54321', url, params, '0/KCTR6DLpKmkAf8muzZqo1nDgQ=')).toBe(false);
    expect(checkTwilioSignature('12345', url, params, undefined)).toBe(false);
    expect(checkTwilioSignature('12345', url, params, 'short')).toBe(false);
  });

  it('speaks text as TwiML with what XML needs escaped', () => {
    expect(speakAndListen('Tom & Jerry <3 "you"', 'alice', 'https://b.example/channels/ch_1/phone?a=1&b=2')).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Say voice="alice">Tom &amp; Jerry &lt;3 &quot;you&quot;</Say>' +
        '<Gather input="speech" action="https://b.example/channels/ch_1/phone?a=1&amp;b=2" method="POST" speechTimeout="auto"/></Response>',
    );
  });
});

describe('email', () => {
  it('reads the sender, subject, Message-ID and the text of a MIME message, the HTML part when there is no text part', async () => {
    const html = [
      'From: "Ada" <ada@example.com>',
      'Subject: =?utf-8?q?Caf=C3=A9?=',
      'Message-ID: <abc@example.com>',
      'Content-Type: text/html; charset=utf-8',
      '',
      '<p>Hello<br>there &amp; <b>bye</b></p><script>x()</script>',
      '',
    ].join('\r\n');
    expect(await parseRawEmail(Buffer.from(html))).toEqual({ from: 'ada@example.com', subject: 'Café', text: 'Hello\nthere & bye', messageId: '<abc@example.com>' });
  });

  it('answers with Re: once', () => {
    expect(replySubject('Order 1042')).toBe('Re: Order 1042');
    expect(replySubject('RE: Order 1042')).toBe('RE: Order 1042');
    expect(replySubject(undefined)).toBe('Re: your message');
  });
});
