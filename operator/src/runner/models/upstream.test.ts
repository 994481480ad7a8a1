import { describe, expect, it } from 'vitest';
import { isRetryableStatus, parseToolInput, retryAfterMs, SseParser } from './upstream.js';

describe('SseParser', () => {
  const stream = 'event: a\ndata: {"x":1}\n\n: a comment\r\ndata: line one\r\ndata:line two\r\n\r\ndata: [DONE]\n\n';
  const expected = [
    { event: 'a', data: '{"x":1}' },
    { data: 'line one\nline two' },
    { data: '[DONE]' },
  ];

  it('reads events, comments, multi-line data and CRLF', () => {
    expect(new SseParser().push(stream)).toEqual(expected);
  });

  it('gives the same events however the stream is cut into chunks', () => {
    for (const size of [1, 2, 3, 5, 7, 11]) {
      const parser = new SseParser();
      const events = [];
      for (let start = 0; start < stream.length; start += size) events.push(...parser.push(stream.slice(start, start + size)));
      expect(events, `chunks of ${size}`).toEqual(expected);
    }
  });

  it('does not take a CR at the end of a chunk and the LF after it for two line endings', () => {
    const parser = new SseParser();
    expect(parser.push('data: one\r')).toEqual([]);
    expect(parser.push('\ndata: two\r\n\r\n')).toEqual([{ data: 'one\ntwo' }]);
  });

  it('holds an event until its blank line', () => {
    const parser = new SseParser();
    expect(parser.push('data: {"a":')).toEqual([]);
    expect(parser.push('1}\n')).toEqual([]);
    expect(parser.push('\n')).toEqual([{ data: '{"a":1}' }]);
  });
});

describe('retryAfterMs', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  const headers = (entries: Record<string, string>) => new Headers(entries);

  it('reads seconds, fractional seconds and HTTP dates', () => {
    expect(retryAfterMs(headers({ 'retry-after': '7' }), now)).toBe(7000);
    expect(retryAfterMs(headers({ 'retry-after': '0.5' }), now)).toBe(500);
    expect(retryAfterMs(headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:30 GMT' }), now)).toBe(30_000);
  });

  it('never asks to wait a negative time, and ignores what it cannot read', () => {
    expect(retryAfterMs(headers({ 'retry-after': 'Tue, 31 Dec 2024 23:59:00 GMT' }), now)).toBe(0);
    expect(retryAfterMs(headers({ 'retry-after': 'soon' }), now)).toBeUndefined();
    expect(retryAfterMs(headers({}), now)).toBeUndefined();
  });

  it("prefers OpenAI's retry-after-ms", () => {
    expect(retryAfterMs(headers({ 'retry-after': '2', 'retry-after-ms': '1250' }), now)).toBe(1250);
  });
});

describe('isRetryableStatus', () => {
  it('retries timeouts, conflicts, rate limits and server errors only', () => {
    const retryable = [400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 529].filter(isRetryableStatus);
    expect(retryable).toEqual([408, 409, 429, 500, 502, 503, 529]);
  });
});

describe('parseToolInput', () => {
  it('parses a JSON object and takes nothing as no arguments', () => {
    expect(parseToolInput('{"path":"/tmp"}')).toEqual({ input: { path: '/tmp' } });
    expect(parseToolInput('')).toEqual({ input: {} });
    expect(parseToolInput('  ')).toEqual({ input: {} });
  });

  it('keeps what is not a JSON object as invalidInput, with an empty input', () => {
    expect(parseToolInput('{"path": "/tm')).toEqual({ input: {}, invalidInput: '{"path": "/tm' });
    expect(parseToolInput('[1,2]')).toEqual({ input: {}, invalidInput: '[1,2]' });
    expect(parseToolInput('"ls"')).toEqual({ input: {}, invalidInput: '"ls"' });
    expect(parseToolInput('null')).toEqual({ input: {}, invalidInput: 'null' });
  });
});
