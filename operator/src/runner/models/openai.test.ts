import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeOpenAI, type FakeModelOptions, type FakeScript } from '../../../../test/helpers/fake-models.js';
import { openAiAdapter } from './openai.js';
import { ModelError, type ModelEndpoint, type ModelRequest } from './types.js';

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
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
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

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  const error = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(error).toBeInstanceOf(ModelError);
  return error as ModelError;
}

describe('openAiAdapter: answers', () => {
  it('streams text through onText in pieces and returns it whole, with usage and stop reason', async () => {
    const server = await fakeOpenAI([{ text: 'The answer is forty-two.', usage: { input: 31, output: 7 } }]);
    const pieces: string[] = [];
    const response = await openAiAdapter.complete(endpoint(server.baseUrl), request({ onText: (piece) => pieces.push(piece) }));
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.join('')).toBe('The answer is forty-two.');
    expect(response).toEqual({ text: 'The answer is forty-two.', toolCalls: [], usage: { inputTokens: 31, outputTokens: 7 }, stopReason: 'stop' });
  });

  it('reassembles a stream cut through lines and UTF-8 characters', async () => {
    const text = 'Grüße aus Köln 🌍, ça va? 日本語';
    const server = await fakeOpenAI([{ text, toolCalls: [{ name: 'note', input: { text: 'ü🌍' } }] }], { chunkBytes: 3 });
    const response = await openAiAdapter.complete(endpoint(server.baseUrl), request());
    expect(response.text).toBe(text);
    expect(response.toolCalls[0]?.input).toEqual({ text: 'ü🌍' });
  });

  it('assembles several tool calls whose arguments arrive in pieces', async () => {
    const server = await fakeOpenAI([
      {
        text: 'Let me look.',
        toolCalls: [
          { id: 'call_a', name: 'read_file', input: { path: '/etc/hosts', lines: { from: 1, to: 20 } } },
          { id: 'call_b', name: 'exec', input: { command: ['ls', '-la', '/tmp'], timeoutSeconds: 30 } },
          { id: 'call_c', name: 'list', input: {} },
        ],
      },
    ]);
    const response = await openAiAdapter.complete(endpoint(server.baseUrl), request());
    expect(response.text).toBe('Let me look.');
    expect(response.stopReason).toBe('tool_calls');
    expect(response.toolCalls).toEqual([
      { id: 'call_a', name: 'read_file', input: { path: '/etc/hosts', lines: { from: 1, to: 20 } } },
      { id: 'call_b', name: 'exec', input: { command: ['ls', '-la', '/tmp'], timeoutSeconds: 30 } },
      { id: 'call_c', name: 'list', input: {} },
    ]);
  });

  it('keeps arguments that are not a JSON object as invalidInput, with input {}', async () => {
    const server = await fakeOpenAI([
      {
        toolCalls: [
          { id: 'call_cut', name: 'write_file', input: '{"path": "/tmp/x", "content": "hal' },
          { id: 'call_array', name: 'exec', input: '["ls"]' },
          { id: 'call_none', name: 'list', input: '' },
        ],
        stopReason: 'length',
      },
    ]);
    const response = await openAiAdapter.complete(endpoint(server.baseUrl), request());
    expect(response.stopReason).toBe('length');
    expect(response.toolCalls).toEqual([
      { id: 'call_cut', name: 'write_file', input: {}, invalidInput: '{"path": "/tmp/x", "content": "hal' },
      { id: 'call_array', name: 'exec', input: {}, invalidInput: '["ls"]' },
      { id: 'call_none', name: 'list', input: {} },
    ]);
  });

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
  it.each([
    { status: 400, retryable: false },
    { status: 401, retryable: false },
    { status: 404, retryable: false },
    { status: 408, retryable: true },
    { status: 409, retryable: true },
    { status: 429, retryable: true },
    { status: 500, retryable: true },
    { status: 503, retryable: true },
  ])('answers HTTP $status as a ModelError, retryable: $retryable', async ({ status, retryable }) => {
    const server = await fakeOpenAI([{ status, error: `upstream says ${status}` }]);
    const error = await failure(openAiAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error).toMatchObject({ status, retryable, retryAfterMs: undefined });
    expect(error.message).toContain(`upstream says ${status}`);
  });

  it('passes on Retry-After', async () => {
    const server = await fakeOpenAI([{ status: 429, error: 'Rate limit reached for gpt-test', retryAfter: 7 }]);
    const error = await failure(openAiAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error).toMatchObject({ status: 429, retryable: true, retryAfterMs: 7000 });
    expect(error.message).toContain('Rate limit reached for gpt-test');
  });

  it('never puts the API key in the message, even when the upstream echoes it', async () => {
    const server = await fakeOpenAI([{ status: 401, error: 'Incorrect API key provided: sk-test-key.' }]);
    const error = await failure(openAiAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error.message).not.toContain('sk-test-key');
    expect(error.message).toContain('Incorrect API key provided');
  });

  it('is refused by a server that expects another key', async () => {
    const server = await fakeOpenAI([{ text: 'never sent' }], { apiKey: 'sk-right' });
    const error = await failure(openAiAdapter.complete(endpoint(server.baseUrl, 'sk-wrong'), request()));
    expect(error).toMatchObject({ status: 401, retryable: false });
    expect(server.apiKeys()).toEqual(['sk-wrong']);
  });

  it('includes the start of a body that is not JSON', async () => {
    const baseUrl = await rawServer((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<html><body>Bad Gateway</body></html>');
    });
    const error = await failure(openAiAdapter.complete(endpoint(baseUrl), request()));
    expect(error).toMatchObject({ status: 502, retryable: true });
    expect(error.message).toContain('Bad Gateway');
  });

  it('answers a closed port with status 0, retryable', async () => {
    const baseUrl = await rawServer(() => {});
    await cleanups.pop()?.();
    const error = await failure(openAiAdapter.complete(endpoint(baseUrl), request()));
    expect(error).toMatchObject({ status: 0, retryable: true });
    expect(error.message).toContain('ECONNREFUSED');
  });

  it('calls a stream without [DONE] ended early: status 0, retryable', async () => {
    const server = await fakeOpenAI([{ text: 'Half an ans', endEarly: true }]);
    const error = await failure(openAiAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error).toMatchObject({ status: 0, retryable: true });
    expect(error.message).toContain('stream ended early');
  });

  it('turns an error sent inside the stream into a ModelError', async () => {
    const server = await fakeOpenAI([{ text: 'Hm', streamError: { type: 'server_error', message: 'The server had an error while processing your request.' } }]);
    const error = await failure(openAiAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error).toMatchObject({ status: 500, retryable: true });
    expect(error.message).toContain('The server had an error');
  });

  it("takes vLLM's status code from an error inside the stream", async () => {
    const baseUrl = await sseServer('data: {"error":{"object":"error","message":"context too long","type":"BadRequestError","code":400}}\n\n');
    const error = await failure(openAiAdapter.complete(endpoint(baseUrl), request()));
    expect(error).toMatchObject({ status: 400, retryable: false });
    expect(error.message).toContain('context too long');
  });

  it('calls a garbled event retryable', async () => {
    const baseUrl = await sseServer('data: {"choices":[{"delta":\n\ndata: [DONE]\n\n');
    const error = await failure(openAiAdapter.complete(endpoint(baseUrl), request()));
    expect(error).toMatchObject({ status: 0, retryable: true });
    expect(error.message).toContain('malformed');
  });

  it('answers a request beyond the script with a visible 500', async () => {
    const server = await fakeOpenAI([]);
    const error = await failure(openAiAdapter.complete(endpoint(server.baseUrl), request()));
    expect(error.status).toBe(500);
    expect(error.message).toContain('request 1 has no scripted turn');
  });
});

describe('openAiAdapter: abort', () => {
  it('throws the abort error while waiting for the answer', async () => {
    const server = await fakeOpenAI([{ text: 'late', delayMs: 5_000 }]);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const started = Date.now();
    const error = await openAiAdapter.complete(endpoint(server.baseUrl), request({ signal: controller.signal })).catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('throws the abort error in the middle of the stream', async () => {
    const server = await fakeOpenAI([{ text: 'one two three four five six' }]);
    const controller = new AbortController();
    const pieces: string[] = [];
    const onText = (piece: string) => {
      pieces.push(piece);
      controller.abort();
    };
    const error = await openAiAdapter.complete(endpoint(server.baseUrl), request({ signal: controller.signal, onText })).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(pieces).toHaveLength(1);
  });

  it('does not call a server when already aborted', async () => {
    const server = await fakeOpenAI([{ text: 'never' }]);
    const error = await openAiAdapter.complete(endpoint(server.baseUrl), request({ signal: AbortSignal.abort() })).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(server.requests).toEqual([]);
  });
});

describe('fake OpenAI server', () => {
  it('lets a function decide each turn from the request', async () => {
    const server = await fakeOpenAI((body: { messages: { content: string }[] }, turn) => ({ text: `turn ${turn}: ${body.messages.at(-1)?.content}` }));
    const first = await openAiAdapter.complete(endpoint(server.baseUrl), request());
    const second = await openAiAdapter.complete(endpoint(server.baseUrl), request({ messages: [{ role: 'user', content: 'again' }] }));
    expect([first.text, second.text]).toEqual(['turn 0: Hello', 'turn 1: again']);
  });
});
