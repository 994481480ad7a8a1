import { describe, expect, it } from 'vitest';
import { ChatError, describeFailure } from './errors.js';

describe('what the visitor reads when a request failed', () => {
  it('names the wait of a rate limit', () => {
    expect(describeFailure(new ChatError('slow down', 429, 'rate_limited', 12.2), 'x')).toBe('Too many messages. Try again in 13 seconds.');
    expect(describeFailure(new ChatError('slow down', 429, 'rate_limited', 0), 'x')).toBe('Too many messages. Try again in 1 second.');
    expect(describeFailure(new ChatError('slow down', 429, 'rate_limited', undefined), 'x')).toBe('Too many messages. Try again in a moment.');
  });

  it('says a deleted channel is gone, a late reply will come, a failed one can be asked again', () => {
    expect(describeFailure(new ChatError('no channel', 404, 'not_found', undefined), 'x')).toBe('This chat is not available.');
    expect(describeFailure(new ChatError('late', 504, 'timeout', undefined), 'x')).toBe('The reply is taking longer than usual; it will appear here.');
    expect(describeFailure(new ChatError('failed', 502, 'provider_error', undefined), 'x')).toBe('No reply could be made. Please try again.');
  });

  it("repeats the server's message otherwise, and blames the connection when there was no answer", () => {
    expect(describeFailure(new ChatError('text: at most 4000 characters', 422, 'unprocessable_entity', undefined), 'Your message could not be sent.')).toBe(
      'Your message could not be sent. text: at most 4000 characters',
    );
    expect(describeFailure(new TypeError('Failed to fetch'), 'Your message could not be sent.')).toBe('Your message could not be sent. Check your connection and try again.');
  });
});
