import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeAnthropic, type FakeModelOptions, type FakeScript } from '../../../../test/helpers/fake-models.js';
import { anthropicAdapter } from './anthropic.js';
import { ModelError, type ModelEndpoint, type ModelRequest } from './types.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((close) => close()));
});

async function fakeAnthropic(script: FakeScript, options?: FakeModelOptions) {
  const server = await startFakeAnthropic(script, options);
  cleanups.push(server.close);
  return server;
}

/** A server that answers with exactly what the listener writes, for streams the fake does not produce. */
async function rawServer(listener: RequestListener): Promise<string> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function sseServer(events: [string, Record<string, unknown>][]): Promise<string> {
  return rawServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(events.map(([type, data]) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`).join(''));
  });
}

function endpoint(baseUrl: string, apiKey = 'sk-ant-test-key'): ModelEndpoint {
  return { api: 'anthropic', baseUrl, apiKey };
}

function request(overrides: Partial<ModelRequest> = {}): ModelRequest {
  return { model: 'claude-test', messages: [{ role: 'user', content: 'Hello' }], tools: [], ...overrides };
}

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  const error = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(error).toBeInstanceOf(ModelError);
  return error as ModelError;
}

describe('anthropicAdapter: answers', () => {
  it('streams text through onText in pieces and returns it whole, with usage and stop reason', async () => {
    const server = await fakeAnthropic([{ text: 'The answer is forty-two.', usage: { input: 31, output: 7 } }]);
    const pieces: string[] = [];
    const response = await anthropicAdapter.complete(endpoint(server.baseUrl), request({ onText: (piece) => pieces.push(piece) }));
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.join('')).toBe('The answer is forty-two.');
    expect(response).toEqual({ text: 'The answer is forty-two.', toolCalls: [], usage: { inputTokens: 31, outputTokens: 7 }, stopReason: 'end_turn' });
  });

  it('reassembles a stream cut through lines and UTF-8 characters', async () => {
    const text = 'Grüße aus Köln 🌍, ça va? 日本語';
    const server = await fakeAnthropic([{ text, toolCalls: [{ name: 'note', input: { text: 'ü🌍' } }] }], { chunkBytes: 3 });
    const response = await anthropicAdapter.complete(endpoint(server.baseUrl), request());
    expect(response.text).toBe(text);
    expect(response.toolCalls[0]?.input).toEqual({ text: 'ü🌍' });
  });

  it('assembles several tool calls whose input arrives in pieces', async () => {
    const server = await fakeAnthropic([
      {
        text: 'Let me look.',
        toolCalls: [
          { id: 'toolu_a', name: 'read_file', input: { path: '/etc/hosts', lines: { from: 1, to: 20 } } },
          { id: 'toolu_b', name: 'exec', input: { command: ['ls', '-la', '/tmp'], timeoutSeconds: 30 } },
          { id: 'toolu_c', name: 'list', input: {} },
        ],
      },
    ]);
    const response = await anthropicAdapter.complete(endpoint(server.baseUrl), request());
    expect(response.text).toBe('Let me look.');
    expect(response.stopReason).toBe('tool_use');
    expect(response.toolCalls).toEqual([
      { id: 'toolu_a', name: 'read_file', input: { path: '/etc/hosts', lines: { from: 1, to: 20 } } },
      { id: 'toolu_b', name: 'exec', input: { command: ['ls', '-la', '/tmp'], timeoutSeconds: 30 } },
      { id: 'toolu_c', name: 'list', input: {} },
    ]);
  });

  it('keeps input cut off by the token limit as invalidInput, with input {}', async () => {
    const server = await fakeAnthropic([{ toolCalls: [{ id: 'toolu_cut', name: 'write_file', input: '{"path": "/tmp/x", "content": "hal' }], stopReason: 'max_tokens' }]);
    const response = await anthropicAdapter.complete(endpoint(server.baseUrl), request());
    expect(response.stopReason).toBe('max_tokens');
    expect(response.toolCalls).toEqual([{ id: 'toolu_cut', name: 'write_file', input: {}, invalidInput: '{"path": "/tmp/x", "content": "hal' }]);
  });

  it('counts cached prompt tokens as input, ignores thinking and unknown events', async () => {
    const baseUrl = await sseServer([
      ['message_start', { message: { id: 'msg_1', usage: { input_tokens: 5, cache_read_input_tokens: 1000, cache_creation_input_tokens: 200, output_tokens: 1 } } }],
      ['content_block_start', { index: 0, content_block: { type: 'thinking', thinking: '' } }],
      ['content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'hmm' } }],
      ['content_block_stop', { index: 0 }],
      ['something_new', { index: 0 }],
      ['content_block_start', { index: 1, content_block: { type: 'text', text: '' } }],
      ['content_block_delta', { index: 1, delta: { type: 'text_delta', text: 'Hi' } }],
      ['content_block_stop', { index: 1 }],
      ['message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 12 } }],
      ['message_stop', {}],
    ]);
    const response = await anthropicAdapter.complete(endpoint(baseUrl), request());
    expect(response).toEqual({ text: 'Hi', toolCalls: [], usage: { inputTokens: 1205, outputTokens: 12 }, stopReason: 'end_turn' });
  });
});

describe('anthropicAdapter: the request', () => {
  it('sends the messages format: system, tools, tool_use blocks, consecutive tool results in one user message', async () => {
    const server = await fakeAnthropic([{ text: 'Done.' }]);
    await anthropicAdapter.complete(
      endpoint(`${server.baseUrl}/`),
      request({
        system: 'You are Berth.',
        maxOutputTokens: 1000,
        temperature: 0.2,
        tools: [{ name: 'exec', description: 'Runs a command', inputSchema: { type: 'object', properties: { command: { type: 'string' } } } }],
        messages: [
          { role: 'user', content: 'List /tmp and /var' },
          {
            role: 'assistant',
            content: 'Looking.',
            toolCalls: [
              { id: 'toolu_1', name: 'exec', input: { command: 'ls /tmp' } },
              { id: 'toolu_2', name: 'exec', input: { command: 'ls /var' } },
            ],
          },
          { role: 'tool', toolCallId: 'toolu_1', name: 'exec', content: 'a.txt', isError: false },
          { role: 'tool', toolCallId: 'toolu_2', name: 'exec', content: 'permission denied', isError: true },
          { role: 'assistant', content: '', toolCalls: [{ id: 'toolu_3', name: 'exec', input: {}, invalidInput: '{"command": ' }] },
          { role: 'tool', toolCallId: 'toolu_3', name: 'exec', content: 'invalid arguments', isError: true },
          { role: 'assistant', content: 'There is a.txt.', toolCalls: [] },
          { role: 'assistant', content: '', toolCalls: [] },
          { role: 'user', content: 'Thanks' },
        ],
      }),
    );
    expect(server.requests).toEqual([
      {
        model: 'claude-test',
        system: 'You are Berth.',
        messages: [
          { role: 'user', content: 'List /tmp and /var' },
          {
            role: 'assistant',
            content: [
              { type: 'text', text: 'Looking.' },
              { type: 'tool_use', id: 'toolu_1', name: 'exec', input: { command: 'ls /tmp' } },
              { type: 'tool_use', id: 'toolu_2', name: 'exec', input: { command: 'ls /var' } },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'toolu_1', content: 'a.txt', is_error: false },
              { type: 'tool_result', tool_use_id: 'toolu_2', content: 'permission denied', is_error: true },
            ],
          },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_3', name: 'exec', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_3', content: 'invalid arguments', is_error: true }] },
          { role: 'assistant', content: [{ type: 'text', text: 'There is a.txt.' }] },
          { role: 'user', content: 'Thanks' },
        ],
        tools: [{ name: 'exec', description: 'Runs a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } }],
        max_tokens: 1000,
        temperature: 0.2,
        stream: true,
      },
    ]);
    expect(server.apiKeys()).toEqual(['sk-ant-test-key']);
    expect(server.headers[0]).toMatchObject({ 'anthropic-version': '2023-06-01', 'content-type': 'application/json' });
    expect(server.headers[0]?.authorization).toBeUndefined();
  });

  it('defaults max_tokens to 4096 and leaves out system, tools and the key when there are none', async () => {
    const server = await fakeAnthropic([{ text: 'Hi' }]);
    await anthropicAdapter.complete({ api: 'anthropic', baseUrl: server.baseUrl }, request());
    expect(server.requests).toEqual([{ model: 'claude-test', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4096, stream: true }]);
    expect(server.headers[0]?.['x-api-key']).toBeUndefined();
  });
});

describe('anthropicAdapter: errors', () => {
  it.each([
    { status: 400, retryable: false },
    { status: 401, retryable: false },
    { status: 403, retryable: false },
    { status: 408, retryable: true },
    { status: 409, retryable: true },
    { status: 429, retryable: true },
    { status: 500, retryable: true },
    { status: 529, retryable: true },
  ])('answers HTTP $status as a ModelError, retryable: $retryable', async ({ status, retryable }) => {
    const server = await fakeAnthropic([{ status, error: `upstream says ${status}` }]);
    const error = await failure(anthropicAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error).toMatchObject({ status, retryable, retryAfterMs: undefined });
    expect(error.message).toContain(`upstream says ${status}`);
  });

  it('passes on Retry-After', async () => {
    const server = await fakeAnthropic([{ status: 429, error: 'Number of request tokens has exceeded your rate limit', retryAfter: 12 }]);
    const error = await failure(anthropicAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error).toMatchObject({ status: 429, retryable: true, retryAfterMs: 12_000 });
    expect(error.message).toContain('exceeded your rate limit');
  });

  it('never puts the API key in the message, even when the upstream echoes it', async () => {
    const server = await fakeAnthropic([{ status: 401, error: 'invalid x-api-key sk-ant-test-key' }]);
    const error = await failure(anthropicAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error.message).not.toContain('sk-ant-test-key');
    expect(error.message).toContain('invalid x-api-key');
  });

  it('is refused by a server that expects another key', async () => {
    const server = await fakeAnthropic([{ text: 'never sent' }], { apiKey: 'sk-ant-right' });
    const error = await failure(anthropicAdapter.complete(endpoint(server.baseUrl, 'sk-ant-wrong'), request()));
    expect(error).toMatchObject({ status: 401, retryable: false });
    expect(server.apiKeys()).toEqual(['sk-ant-wrong']);
  });

  it('answers a closed port with status 0, retryable', async () => {
    const baseUrl = await rawServer(() => {});
    await cleanups.pop()?.();
    const error = await failure(anthropicAdapter.complete(endpoint(baseUrl), request()));
    expect(error).toMatchObject({ status: 0, retryable: true });
    expect(error.message).toContain('ECONNREFUSED');
  });

  it('calls a stream without message_stop ended early: status 0, retryable', async () => {
    const server = await fakeAnthropic([{ text: 'Half an ans', toolCalls: [{ name: 'exec', input: { command: 'ls' } }], endEarly: true }]);
    const error = await failure(anthropicAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error).toMatchObject({ status: 0, retryable: true });
    expect(error.message).toContain('stream ended early');
  });

  it('answers an overloaded_error event with status 529, retryable', async () => {
    const server = await fakeAnthropic([{ text: 'Hm', streamError: { type: 'overloaded_error', message: 'Overloaded' } }]);
    const error = await failure(anthropicAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error).toMatchObject({ status: 529, retryable: true });
    expect(error.message).toContain('Overloaded');
  });

  it('gives other error events the status of their type', async () => {
    const server = await fakeAnthropic([
      { streamError: { type: 'invalid_request_error', message: 'prompt is too long' } },
      { streamError: { type: 'rate_limit_error', message: 'slow down' } },
      { streamError: { type: 'brand_new_error', message: 'who knows' } },
    ]);
    const errors = [];
    for (let i = 0; i < 3; i++) errors.push(await failure(anthropicAdapter.complete(endpoint(server.baseUrl), request())));
    expect(errors.map(({ status, retryable }) => ({ status, retryable }))).toEqual([
      { status: 400, retryable: false },
      { status: 429, retryable: true },
      { status: 500, retryable: true },
    ]);
    expect(errors[0]?.message).toContain('prompt is too long');
  });

  it('refuses (as the API does) a request without max_tokens, which the adapter never sends', async () => {
    const server = await fakeAnthropic([{ text: 'Hi' }]);
    const response = await fetch(`${server.baseUrl}/v1/messages`, { method: 'POST', body: JSON.stringify({ model: 'claude-test', messages: [], stream: true }) });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'fake-models: max_tokens: Field required' } });
  });
});

describe('anthropicAdapter: abort', () => {
  it('throws the abort error while waiting for the answer', async () => {
    const server = await fakeAnthropic([{ text: 'late', delayMs: 5_000 }]);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const started = Date.now();
    const error = await anthropicAdapter.complete(endpoint(server.baseUrl), request({ signal: controller.signal })).catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('throws the abort error in the middle of the stream', async () => {
    const server = await fakeAnthropic([{ text: 'one two three four five six' }]);
    const controller = new AbortController();
    const pieces: string[] = [];
    const onText = (piece: string) => {
      pieces.push(piece);
      controller.abort();
    };
    const error = await anthropicAdapter.complete(endpoint(server.baseUrl), request({ signal: controller.signal, onText })).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(pieces).toHaveLength(1);
  });
});
