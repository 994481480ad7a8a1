import type { RequestListener } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import {
  startFakeAnthropic,
  startFakeOpenAI,
  modelFailure,
  startRawServer,
  type FakeModelOptions,
  type FakeModelServer,
  type FakeScript,
} from '../../../../test/helpers/fake-models.js';
import { anthropicAdapter } from './anthropic.js';
import { openAiAdapter } from './openai.js';
import { ModelError, type ModelAdapter, type ModelEndpoint, type ModelRequest } from './types.js';

/**
 * What every model adapter must do, each against a fake server that speaks its vendor's wire
 * protocol. What only one vendor's format has (the request body, usage fields, error types)
 * stays in the adapter's own test file.
 */
interface AdapterUnderTest {
  name: string;
  adapter: ModelAdapter;
  api: ModelEndpoint['api'];
  startFake(script: FakeScript, options?: FakeModelOptions): Promise<FakeModelServer>;
  model: string;
  apiKey: string;
  /** The path a raw server's base URL needs, as the vendor's SDKs name base URLs. */
  basePath: string;
  /** A tool call id in the vendor's style. */
  callId(suffix: string): string;
  stopReasons: { end: string; toolUse: string; tokenLimit: string };
  rateLimit: { retryAfterSeconds: number; message: string; expectedText: string };
  /** A 401 body that quotes the key back. */
  echoedKey: { message: string; expectedText: string };
  /** An error sent inside the stream, and the status it means. */
  streamError: { type: string; message: string; status: number; expectedText: string };
  /** A stream body whose event data is cut JSON. */
  garbledStream: string;
}

const adapters: AdapterUnderTest[] = [
  {
    name: 'openAiAdapter',
    adapter: openAiAdapter,
    api: 'openai',
    startFake: startFakeOpenAI,
    model: 'gpt-test',
    apiKey: 'sk-test-key',
    basePath: '/v1',
    callId: (suffix) => `call_${suffix}`,
    stopReasons: { end: 'stop', toolUse: 'tool_calls', tokenLimit: 'length' },
    rateLimit: { retryAfterSeconds: 7, message: 'Rate limit reached for gpt-test', expectedText: 'Rate limit reached for gpt-test' },
    echoedKey: { message: 'Incorrect API key provided: sk-test-key.', expectedText: 'Incorrect API key provided' },
    streamError: { type: 'server_error', message: 'The server had an error while processing your request.', status: 500, expectedText: 'The server had an error' },
    garbledStream: 'data: {"choices":[{"delta":\n\ndata: [DONE]\n\n',
  },
  {
    name: 'anthropicAdapter',
    adapter: anthropicAdapter,
    api: 'anthropic',
    startFake: startFakeAnthropic,
    model: 'claude-test',
    apiKey: 'sk-ant-test-key',
    basePath: '',
    callId: (suffix) => `toolu_${suffix}`,
    stopReasons: { end: 'end_turn', toolUse: 'tool_use', tokenLimit: 'max_tokens' },
    rateLimit: { retryAfterSeconds: 12, message: 'Number of request tokens has exceeded your rate limit', expectedText: 'exceeded your rate limit' },
    echoedKey: { message: 'invalid x-api-key sk-ant-test-key', expectedText: 'invalid x-api-key' },
    streamError: { type: 'overloaded_error', message: 'Overloaded', status: 529, expectedText: 'Overloaded' },
    garbledStream: 'event: message_start\ndata: {"type":"message_start","message":\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n',
  },
];

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((close) => close()));
});

const failure = modelFailure;

describe.each(adapters)('$name', (subject) => {
  const { adapter, callId, stopReasons } = subject;

  async function fake(script: FakeScript, options?: FakeModelOptions) {
    const server = await subject.startFake(script, options);
    cleanups.push(server.close);
    return server;
  }

  /** A server that answers every request with exactly what the listener writes, for streams the fake does not produce. */
  async function rawServer(listener: RequestListener): Promise<string> {
    const server = await startRawServer(listener);
    cleanups.push(server.close);
    return `${server.url}${subject.basePath}`;
  }

  function endpoint(baseUrl: string, apiKey = subject.apiKey): ModelEndpoint {
    return { api: subject.api, baseUrl, apiKey };
  }

  function request(overrides: Partial<ModelRequest> = {}): ModelRequest {
    return { model: subject.model, messages: [{ role: 'user', content: 'Hello' }], tools: [], ...overrides };
  }

  describe('answers', () => {
    it('streams text through onText in pieces and returns it whole, with usage and stop reason', async () => {
      const server = await fake([{ text: 'The answer is forty-two.', usage: { input: 31, output: 7 } }]);
      const pieces: string[] = [];
      const response = await adapter.complete(endpoint(server.baseUrl), request({ onText: (piece) => pieces.push(piece) }));
      expect(pieces.length).toBeGreaterThan(1);
      expect(pieces.join('')).toBe('The answer is forty-two.');
      expect(response).toEqual({ text: 'The answer is forty-two.', toolCalls: [], usage: { inputTokens: 31, outputTokens: 7 }, stopReason: stopReasons.end });
    });

    it('reassembles a stream cut through lines and UTF-8 characters', async () => {
      const text = 'Grüße aus Köln 🌍, ça va? 日本語';
      const server = await fake([{ text, toolCalls: [{ name: 'note', input: { text: 'ü🌍' } }] }], { chunkBytes: 3 });
      const response = await adapter.complete(endpoint(server.baseUrl), request());
      expect(response.text).toBe(text);
      expect(response.toolCalls[0]?.input).toEqual({ text: 'ü🌍' });
    });

    it('assembles several tool calls whose input arrives in pieces', async () => {
      const calls = [
        { id: callId('a'), name: 'read_file', input: { path: '/etc/hosts', lines: { from: 1, to: 20 } } },
        { id: callId('b'), name: 'exec', input: { command: ['ls', '-la', '/tmp'], timeoutSeconds: 30 } },
        { id: callId('c'), name: 'list', input: {} },
      ];
      const server = await fake([{ text: 'Let me look.', toolCalls: calls }]);
      const response = await adapter.complete(endpoint(server.baseUrl), request());
      expect(response.text).toBe('Let me look.');
      expect(response.stopReason).toBe(stopReasons.toolUse);
      expect(response.toolCalls).toEqual([
        { id: callId('a'), name: 'read_file', input: { path: '/etc/hosts', lines: { from: 1, to: 20 } } },
        { id: callId('b'), name: 'exec', input: { command: ['ls', '-la', '/tmp'], timeoutSeconds: 30 } },
        { id: callId('c'), name: 'list', input: {} },
      ]);
    });

    it('keeps input that is not a JSON object (cut off by the token limit, an array) as invalidInput, with input {}', async () => {
      const server = await fake([
        {
          toolCalls: [
            { id: callId('cut'), name: 'write_file', input: '{"path": "/tmp/x", "content": "hal' },
            { id: callId('array'), name: 'exec', input: '["ls"]' },
            { id: callId('none'), name: 'list', input: '' },
          ],
          stopReason: stopReasons.tokenLimit,
        },
      ]);
      const response = await adapter.complete(endpoint(server.baseUrl), request());
      expect(response.stopReason).toBe(stopReasons.tokenLimit);
      expect(response.toolCalls).toEqual([
        { id: callId('cut'), name: 'write_file', input: {}, invalidInput: '{"path": "/tmp/x", "content": "hal' },
        { id: callId('array'), name: 'exec', input: {}, invalidInput: '["ls"]' },
        { id: callId('none'), name: 'list', input: {} },
      ]);
    });
  });

  describe('errors', () => {
    it.each([
      { status: 400, retryable: false },
      { status: 401, retryable: false },
      { status: 403, retryable: false },
      { status: 404, retryable: false },
      { status: 408, retryable: true },
      { status: 409, retryable: true },
      { status: 429, retryable: true },
      { status: 500, retryable: true },
      { status: 503, retryable: true },
      { status: 529, retryable: true },
    ])('answers HTTP $status as a ModelError, retryable: $retryable', async ({ status, retryable }) => {
      const server = await fake([{ status, error: `upstream says ${status}` }]);
      const error = await failure(adapter.complete(endpoint(server.baseUrl), request()));
      expect(error).toMatchObject({ status, retryable, retryAfterMs: undefined });
      expect(error.message).toContain(`upstream says ${status}`);
    });

    it('passes on Retry-After', async () => {
      const { retryAfterSeconds, message, expectedText } = subject.rateLimit;
      const server = await fake([{ status: 429, error: message, retryAfter: retryAfterSeconds }]);
      const error = await failure(adapter.complete(endpoint(server.baseUrl), request()));
      expect(error).toMatchObject({ status: 429, retryable: true, retryAfterMs: retryAfterSeconds * 1000 });
      expect(error.message).toContain(expectedText);
    });

    it('never puts the API key in the message, even when the upstream echoes it', async () => {
      const server = await fake([{ status: 401, error: subject.echoedKey.message }]);
      const error = await failure(adapter.complete(endpoint(server.baseUrl), request()));
      expect(error.message).not.toContain(subject.apiKey);
      expect(error.message).toContain(subject.echoedKey.expectedText);
    });

    it('is refused by a server that expects another key', async () => {
      const server = await fake([{ text: 'never sent' }], { apiKey: `${subject.apiKey}-right` });
      const error = await failure(adapter.complete(endpoint(server.baseUrl, `${subject.apiKey}-wrong`), request()));
      expect(error).toMatchObject({ status: 401, retryable: false });
      expect(server.apiKeys()).toEqual([`${subject.apiKey}-wrong`]);
    });

    it('includes the start of a body that is not JSON', async () => {
      const baseUrl = await rawServer((_req, res) => {
        res.writeHead(502, { 'content-type': 'text/html' });
        res.end('<html><body>Bad Gateway</body></html>');
      });
      const error = await failure(adapter.complete(endpoint(baseUrl), request()));
      expect(error).toMatchObject({ status: 502, retryable: true });
      expect(error.message).toContain('Bad Gateway');
    });

    it('answers a closed port with status 0, retryable', async () => {
      const baseUrl = await rawServer(() => {});
      await cleanups.pop()?.();
      const error = await failure(adapter.complete(endpoint(baseUrl), request()));
      expect(error).toMatchObject({ status: 0, retryable: true });
      expect(error.message).toContain('ECONNREFUSED');
    });

    it.each([
      { cut: 'in the text', turn: { text: 'Half an ans', endEarly: true } },
      { cut: 'after a tool call', turn: { text: 'Half an ans', toolCalls: [{ name: 'exec', input: { command: 'ls' } }], endEarly: true } },
    ])('calls a stream without its end marker ended early ($cut): status 0, retryable', async ({ turn }) => {
      const server = await fake([turn]);
      const error = await failure(adapter.complete(endpoint(server.baseUrl), request()));
      expect(error).toMatchObject({ status: 0, retryable: true });
      expect(error.message).toContain('stream ended early');
    });

    it('turns an error sent inside the stream into a ModelError with the status it means', async () => {
      const { type, message, status, expectedText } = subject.streamError;
      const server = await fake([{ text: 'Hm', streamError: { type, message } }]);
      const error = await failure(adapter.complete(endpoint(server.baseUrl), request()));
      expect(error).toMatchObject({ status, retryable: true });
      expect(error.message).toContain(expectedText);
    });

    it('calls a garbled event retryable', async () => {
      const baseUrl = await rawServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(subject.garbledStream);
      });
      const error = await failure(adapter.complete(endpoint(baseUrl), request()));
      expect(error).toMatchObject({ status: 0, retryable: true });
      expect(error.message).toContain('malformed');
    });

    it('answers a request beyond the script with a visible 500', async () => {
      const server = await fake([]);
      const error = await failure(adapter.complete(endpoint(server.baseUrl), request()));
      expect(error.status).toBe(500);
      expect(error.message).toContain('request 1 has no scripted turn');
    });
  });

  describe('abort', () => {
    it('throws the abort error while waiting for the answer', async () => {
      const server = await fake([{ text: 'late', delayMs: 5_000 }]);
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 50);
      const started = Date.now();
      const error = await adapter.complete(endpoint(server.baseUrl), request({ signal: controller.signal })).catch((e: unknown) => e);
      expect(error).not.toBeInstanceOf(ModelError);
      expect(error).toMatchObject({ name: 'AbortError' });
      expect(Date.now() - started).toBeLessThan(2_000);
    });

    it('throws the abort error in the middle of the stream', async () => {
      const server = await fake([{ text: 'one two three four five six' }]);
      const controller = new AbortController();
      const pieces: string[] = [];
      const onText = (piece: string) => {
        pieces.push(piece);
        controller.abort();
      };
      const error = await adapter.complete(endpoint(server.baseUrl), request({ signal: controller.signal, onText })).catch((e: unknown) => e);
      expect(error).toMatchObject({ name: 'AbortError' });
      expect(pieces).toHaveLength(1);
    });

    it('does not call a server when already aborted', async () => {
      const server = await fake([{ text: 'never' }]);
      const error = await adapter.complete(endpoint(server.baseUrl), request({ signal: AbortSignal.abort() })).catch((e: unknown) => e);
      expect(error).toMatchObject({ name: 'AbortError' });
      expect(server.requests).toEqual([]);
    });
  });

  describe('its fake server', () => {
    it('lets a function decide each turn from the request', async () => {
      const server = await fake((body: { messages: { content: string }[] }, turn) => ({ text: `turn ${turn}: ${body.messages.at(-1)?.content}` }));
      const first = await adapter.complete(endpoint(server.baseUrl), request());
      const second = await adapter.complete(endpoint(server.baseUrl), request({ messages: [{ role: 'user', content: 'again' }] }));
      expect([first.text, second.text]).toEqual(['turn 0: Hello', 'turn 1: again']);
    });
  });
});
