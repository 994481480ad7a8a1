import type { RequestListener } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeOpenAI, modelFailure, startRawServer, type FakeModelOptions, type FakeScript } from '../../../../test/helpers/fake-models.js';
import { openAiAdapter } from './openai.js';
import type { ModelEndpoint, ModelRequest } from './types.js';

/** What only the OpenAI wire format has; what every adapter must do is in adapter-contract.test.ts. */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((close) => close()));
});

async function fakeOpenAI(script: FakeScript, options?: FakeModelOptions) {
  const server = await startFakeOpenAI(script, options);
  cleanups.push(server.close);
  return server;
}

/** A server that answers every request with exactly this status, headers and body, for streams the fake does not produce. */
async function rawServer(listener: RequestListener): Promise<string> {
  const server = await startRawServer(listener);
  cleanups.push(server.close);
  return `${server.url}/v1`;
}

function sseServer(body: string): Promise<string> {
  return rawServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(body);
  });
}

function endpoint(baseUrl: string, apiKey = 'sk-test-key'): ModelEndpoint {
  return { api: 'openai', baseUrl, apiKey };
}

function request(overrides: Partial<ModelRequest> = {}): ModelRequest {
  return { model: 'gpt-test', messages: [{ role: 'user', content: 'Hello' }], tools: [], ...overrides };
}

const failure = modelFailure;

describe('openAiAdapter: answers', () => {
  it('counts zero tokens when the server sends no usage, and makes up ids a server leaves out', async () => {
    const baseUrl = await sseServer(
      [
        'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}',
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"list","arguments":"{}"}}]}}]}',
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        'data: [DONE]',
        '',
      ].join('\n\n'),
    );
    const response = await openAiAdapter.complete(endpoint(baseUrl), request());
    expect(response.usage).toEqual({ inputTokens: 0, outputTokens: 0 });
    expect(response.toolCalls).toEqual([{ id: expect.stringMatching(/^call_\w+$/), name: 'list', input: {} }]);
  });
});

describe('openAiAdapter: the request', () => {
  it('sends the chat-completions format: system first, tools, assistant tool calls, tool results', async () => {
    const server = await fakeOpenAI([{ text: 'Done.' }]);
    await openAiAdapter.complete(
      endpoint(`${server.baseUrl}/`),
      request({
        system: 'You are Berth.',
        maxOutputTokens: 1000,
        temperature: 0.2,
        tools: [{ name: 'exec', description: 'Runs a command', inputSchema: { type: 'object', properties: { command: { type: 'string' } } } }],
        messages: [
          { role: 'user', content: 'List /tmp' },
          {
            role: 'assistant',
            content: '',
            toolCalls: [
              { id: 'call_1', name: 'exec', input: { command: 'ls /tmp' } },
              { id: 'call_2', name: 'exec', input: {}, invalidInput: '{"command": ' },
            ],
          },
          { role: 'tool', toolCallId: 'call_1', name: 'exec', content: 'a.txt', isError: false },
          { role: 'tool', toolCallId: 'call_2', name: 'exec', content: 'invalid arguments', isError: true },
          { role: 'assistant', content: 'There is a.txt.', toolCalls: [] },
          { role: 'assistant', content: '', toolCalls: [] },
          { role: 'user', content: 'Thanks' },
        ],
      }),
    );
    expect(server.requests).toEqual([
      {
        model: 'gpt-test',
        messages: [
          { role: 'system', content: 'You are Berth.' },
          { role: 'user', content: 'List /tmp' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'exec', arguments: '{"command":"ls /tmp"}' } },
              { id: 'call_2', type: 'function', function: { name: 'exec', arguments: '{}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: 'a.txt' },
          { role: 'tool', tool_call_id: 'call_2', content: 'invalid arguments' },
          { role: 'assistant', content: 'There is a.txt.' },
          { role: 'assistant', content: '' },
          { role: 'user', content: 'Thanks' },
        ],
        tools: [{ type: 'function', function: { name: 'exec', description: 'Runs a command', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }],
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 1000,
        temperature: 0.2,
      },
    ]);
    expect(server.apiKeys()).toEqual(['sk-test-key']);
    expect(server.headers[0]?.['content-type']).toBe('application/json');
  });

  it('leaves out tools, system, limits and the Authorization header when there are none', async () => {
    const server = await fakeOpenAI([{ text: 'Hi' }]);
    await openAiAdapter.complete({ api: 'openai', baseUrl: server.baseUrl }, request());
    expect(server.requests).toEqual([{ model: 'gpt-test', messages: [{ role: 'user', content: 'Hello' }], stream: true, stream_options: { include_usage: true } }]);
    expect(server.headers[0]?.authorization).toBeUndefined();
  });
});

describe('openAiAdapter: errors', () => {
  it("takes vLLM's status code from an error inside the stream", async () => {
    const baseUrl = await sseServer('data: {"error":{"object":"error","message":"context too long","type":"BadRequestError","code":400}}\n\n');
    const error = await failure(openAiAdapter.complete(endpoint(baseUrl), request()));
    expect(error).toMatchObject({ status: 400, retryable: false });
    expect(error.message).toContain('context too long');
  });
});
