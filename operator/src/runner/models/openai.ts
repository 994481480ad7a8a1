/**
 * The OpenAI chat-completions API, streamed. Also what vLLM, Ollama, LiteLLM and most
 * self-hosted servers speak, so the endpoint's `baseUrl` is the only difference.
 */
import { randomUUID } from 'node:crypto';
import type { Message, ModelAdapter, ModelEndpoint, ModelRequest, ModelResponse, ToolCall, ToolDefinition } from './types.js';
import {
  endpointUrl,
  eventJson,
  isObject,
  isRetryableStatus,
  numberField,
  parseToolInput,
  postForStream,
  sseEvents,
  streamEndedEarly,
  stringField,
  upstreamError,
  type UpstreamCall,
} from './upstream.js';

export const openAiAdapter: ModelAdapter = {
  async complete(endpoint, request) {
    const call = openAiCall(endpoint, request);
    const response = await postForStream(call);
    return readStream(call, response, request.onText);
  },
};

function openAiCall(endpoint: ModelEndpoint, request: ModelRequest): UpstreamCall {
  const url = endpointUrl(endpoint.baseUrl, '/chat/completions');
  return {
    label: `OpenAI-compatible API at ${url.host}`,
    url,
    headers: {
      'content-type': 'application/json',
      ...(endpoint.apiKey ? { authorization: `Bearer ${endpoint.apiKey}` } : {}),
    },
    body: openAiBody(request),
    signal: request.signal,
    apiKey: endpoint.apiKey,
    errorDetail: (body) => (isObject(body) ? stringField(body.error, 'message') : undefined),
  };
}

function openAiBody(request: ModelRequest): Record<string, unknown> {
  return {
    model: request.model,
    messages: [...(request.system ? [{ role: 'system', content: request.system }] : []), ...request.messages.map(openAiMessage)],
    ...(request.tools.length > 0 ? { tools: request.tools.map(openAiTool) } : {}),
    stream: true,
    // Without this the stream carries no token counts at all.
    stream_options: { include_usage: true },
    ...(request.maxOutputTokens === undefined ? {} : { max_tokens: request.maxOutputTokens }),
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    ...(request.topP === undefined ? {} : { top_p: request.topP }),
  };
}

function openAiTool(tool: ToolDefinition): Record<string, unknown> {
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.inputSchema } };
}

/**
 * The chat format has no error flag on a tool result: the loop's result text has to say
 * that the tool failed (Anthropic's `is_error` has no counterpart here).
 */
function openAiMessage(message: Message): Record<string, unknown> {
  switch (message.role) {
    case 'user':
      return { role: 'user', content: message.content };
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
    case 'assistant':
      if (message.toolCalls.length === 0) {
        // `null` content is only accepted next to tool calls; an empty reply stays an empty string.
        return { role: 'assistant', content: message.content };
      }
      return { role: 'assistant', content: message.content || null, tool_calls: message.toolCalls.map(openAiToolCall) };
  }
}

function openAiToolCall(call: ToolCall): Record<string, unknown> {
  return { id: call.id, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.input) } };
}

/** A tool call as its pieces arrive: `id` and `name` first, then `arguments` in fragments. */
interface PartialToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** Everything the stream has said so far. */
class Completion {
  text = '';
  stopReason = 'unknown';
  usage = { inputTokens: 0, outputTokens: 0 };
  private readonly toolCalls = new Map<number, PartialToolCall>();

  constructor(private readonly onText: ((text: string) => void) | undefined) {}

  chunk(chunk: Record<string, unknown>): void {
    const choice = Array.isArray(chunk.choices) ? (chunk.choices[0] as unknown) : undefined;
    if (isObject(choice)) {
      const delta = choice.delta;
      const content = stringField(delta, 'content');
      if (content) this.addText(content);
      if (isObject(delta) && Array.isArray(delta.tool_calls)) delta.tool_calls.forEach((piece: unknown, position) => this.addToolCallPiece(piece, position));
      const finishReason = stringField(choice, 'finish_reason');
      if (finishReason) this.stopReason = finishReason;
    }
    // The last chunk carries the usage (with `include_usage`); servers that repeat it send running totals.
    if (isObject(chunk.usage)) {
      this.usage = { inputTokens: numberField(chunk.usage, 'prompt_tokens') ?? 0, outputTokens: numberField(chunk.usage, 'completion_tokens') ?? 0 };
    }
  }

  private addText(piece: string): void {
    this.text += piece;
    this.onText?.(piece);
  }

  /** Servers that leave out `index` send whole calls, one per array position. */
  private addToolCallPiece(piece: unknown, position: number): void {
    if (!isObject(piece)) return;
    const index = numberField(piece, 'index') ?? position;
    const call = this.toolCalls.get(index) ?? { id: '', name: '', arguments: '' };
    call.id = stringField(piece, 'id') || call.id;
    call.name = stringField(piece.function, 'name') || call.name;
    call.arguments += stringField(piece.function, 'arguments') ?? '';
    this.toolCalls.set(index, call);
  }

  response(): ModelResponse {
    const toolCalls = [...this.toolCalls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, call]): ToolCall => ({
        // Some servers send no id; the loop still needs one to pair the result with the call.
        id: call.id || `call_${randomUUID().replaceAll('-', '')}`,
        name: call.name,
        ...parseToolInput(call.arguments),
      }));
    return { text: this.text, toolCalls, usage: this.usage, stopReason: this.stopReason };
  }
}

/** The stream is complete only at `data: [DONE]`; ending before it means the answer was cut. */
async function readStream(call: UpstreamCall, response: Response, onText: ModelRequest['onText']): Promise<ModelResponse> {
  const completion = new Completion(onText);
  for await (const event of sseEvents(call, response)) {
    if (event.data.trim() === '[DONE]') return completion.response();
    const chunk = eventJson(call, event);
    if (chunk.error !== undefined) throw streamedError(call, chunk.error);
    completion.chunk(chunk);
  }
  throw streamEndedEarly(call);
}

/**
 * An error sent inside a 200 stream (OpenAI on server trouble, vLLM on bad requests). vLLM
 * puts the HTTP status it means in `code`; without one it is the server's fault (500).
 */
function streamedError(call: UpstreamCall, error: unknown): Error {
  const status = numberField(error, 'code') ?? 500;
  const message = stringField(error, 'message') ?? JSON.stringify(error);
  return upstreamError(call, `${call.label} failed while streaming (${status}): ${message}`, status, isRetryableStatus(status));
}
