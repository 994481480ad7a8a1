import type { RequestListener } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeAnthropic, modelFailure, startRawServer, type FakeModelOptions, type FakeScript } from '../../../../test/helpers/fake-models.js';
import { anthropicAdapter } from './anthropic.js';
import type { ModelEndpoint, ModelRequest } from './types.js';

/** What only the Anthropic wire format has; what every adapter must do is in adapter-contract.test.ts. */
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
  const server = await startRawServer(listener);
  cleanups.push(server.close);
  return `${server.url}`;
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

const failure = modelFailure;

describe('anthropicAdapter: answers', () => {
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
