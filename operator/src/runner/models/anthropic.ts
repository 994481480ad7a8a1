/** The Anthropic messages API, streamed. */
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

/** The API refuses a request without `max_tokens`; this is enough for a tool-using turn. */
const DEFAULT_MAX_TOKENS = 4096;

export const anthropicAdapter: ModelAdapter = {
  async complete(endpoint, request) {
    const call = anthropicCall(endpoint, request);
    const response = await postForStream(call);
    return readStream(call, response, request.onText);
  },
};

function anthropicCall(endpoint: ModelEndpoint, request: ModelRequest): UpstreamCall {
  const url = endpointUrl(endpoint.baseUrl, '/v1/messages');
  return {
    label: `Anthropic API at ${url.host}`,
    url,
    headers: {
      'content-type': 'application/json',
      'anthropic-version': '2023-06-01',
      ...(endpoint.apiKey ? { 'x-api-key': endpoint.apiKey } : {}),
    },
    body: anthropicBody(request),
    signal: request.signal,
    apiKey: endpoint.apiKey,
    errorDetail: (body) => (isObject(body) ? stringField(body.error, 'message') : undefined),
  };
}

function anthropicBody(request: ModelRequest): Record<string, unknown> {
  return {
    model: request.model,
    ...(request.system ? { system: request.system } : {}),
    messages: anthropicMessages(request.messages),
    ...(request.tools.length > 0 ? { tools: request.tools.map(anthropicTool) } : {}),
    max_tokens: request.maxOutputTokens ?? DEFAULT_MAX_TOKENS,
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    ...(request.topP === undefined ? {} : { top_p: request.topP }),
    stream: true,
  };
}

function anthropicTool(tool: ToolDefinition): Record<string, unknown> {
  return { name: tool.name, description: tool.description, input_schema: tool.inputSchema };
}

/**
 * The API wants every result of one assistant turn in the single user message that follows
 * it, so consecutive tool results are gathered into one message.
 */
function anthropicMessages(messages: Message[]): Record<string, unknown>[] {
  const converted: Record<string, unknown>[] = [];
  let toolResults: Record<string, unknown>[] | undefined;
  for (const message of messages) {
    if (message.role === 'tool') {
      const result = { type: 'tool_result', tool_use_id: message.toolCallId, content: message.content, is_error: message.isError };
      if (toolResults) {
        toolResults.push(result);
      } else {
        toolResults = [result];
        converted.push({ role: 'user', content: toolResults });
      }
      continue;
    }
    toolResults = undefined;
    const plain = message.role === 'user' ? { role: 'user', content: message.content } : assistantMessage(message);
    if (plain) converted.push(plain);
  }
  return converted;
}

/**
 * An assistant turn with neither text nor tool calls is left out: the API refuses empty
 * content (and empty text blocks), and it joins the user turns on either side by itself.
 */
function assistantMessage(message: Extract<Message, { role: 'assistant' }>): Record<string, unknown> | undefined {
  const content: Record<string, unknown>[] = [
    ...(message.content ? [{ type: 'text', text: message.content }] : []),
    ...message.toolCalls.map((call: ToolCall) => ({ type: 'tool_use', id: call.id, name: call.name, input: call.input })),
  ];
  return content.length > 0 ? { role: 'assistant', content } : undefined;
}

/** A tool_use block as it streams: its input arrives as pieces of JSON text. */
interface PartialToolUse {
  id: string;
  name: string;
  json: string;
  /** What content_block_start said; used only when no JSON pieces follow. */
  startInput: Record<string, unknown>;
}

/** Everything the stream has said so far. */
class MessageStream {
  text = '';
  stopReason = 'unknown';
  usage = { inputTokens: 0, outputTokens: 0 };
  finished = false;
  private readonly toolUses = new Map<number, PartialToolUse>();

  constructor(
    private readonly call: UpstreamCall,
    private readonly onText: ((text: string) => void) | undefined,
  ) {}

  /** Event types not handled here (ping, thinking deltas, future additions) are ignored, as the API's versioning asks. */
  event(type: string | undefined, data: Record<string, unknown>): void {
    switch (type) {
      case 'message_start':
        return this.messageStart(data.message);
      case 'content_block_start':
        return this.blockStart(numberField(data, 'index') ?? 0, data.content_block);
      case 'content_block_delta':
        return this.blockDelta(numberField(data, 'index') ?? 0, data.delta);
      case 'message_delta':
        return this.messageDelta(data);
      case 'message_stop':
        this.finished = true;
        return;
      case 'error':
        throw streamedError(this.call, data.error);
    }
  }

  /** Cached prompt tokens are counted apart from `input_tokens`; they are input all the same. */
  private messageStart(message: unknown): void {
    const usage = isObject(message) ? message.usage : undefined;
    const input = ['input_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'].reduce((sum, key) => sum + (numberField(usage, key) ?? 0), 0);
    this.usage = { inputTokens: input, outputTokens: numberField(usage, 'output_tokens') ?? 0 };
  }

  private blockStart(index: number, block: unknown): void {
    if (!isObject(block)) return;
    if (block.type === 'text') this.addText(stringField(block, 'text') ?? '');
    if (block.type === 'tool_use') {
      const startInput = isObject(block.input) ? block.input : {};
      this.toolUses.set(index, { id: stringField(block, 'id') ?? '', name: stringField(block, 'name') ?? '', json: '', startInput });
    }
  }

  private blockDelta(index: number, delta: unknown): void {
    if (!isObject(delta)) return;
    if (delta.type === 'text_delta') this.addText(stringField(delta, 'text') ?? '');
    const toolUse = this.toolUses.get(index);
    if (delta.type === 'input_json_delta' && toolUse) toolUse.json += stringField(delta, 'partial_json') ?? '';
  }

  /** `output_tokens` here is the running total for the whole message. */
  private messageDelta(data: Record<string, unknown>): void {
    const stopReason = stringField(data.delta, 'stop_reason');
    if (stopReason) this.stopReason = stopReason;
    const output = numberField(data.usage, 'output_tokens');
    if (output !== undefined) this.usage = { ...this.usage, outputTokens: output };
  }

  private addText(piece: string): void {
    if (!piece) return;
    this.text += piece;
    this.onText?.(piece);
  }

  response(): ModelResponse {
    const toolCalls = [...this.toolUses.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, use]): ToolCall => ({
        id: use.id,
        name: use.name,
        ...(use.json.trim() === '' ? { input: use.startInput } : parseToolInput(use.json)),
      }));
    return { text: this.text, toolCalls, usage: this.usage, stopReason: this.stopReason };
  }
}

/** The stream is complete only at `message_stop`; ending before it means the answer was cut. */
async function readStream(call: UpstreamCall, response: Response, onText: ModelRequest['onText']): Promise<ModelResponse> {
  const stream = new MessageStream(call, onText);
  for await (const event of sseEvents(call, response)) {
    const data = eventJson(call, event);
    stream.event(stringField(data, 'type') ?? event.event, data);
    if (stream.finished) return stream.response();
  }
  throw streamEndedEarly(call);
}

/** The HTTP status Anthropic documents for each error type, so a streamed error retries like the same error as a status. */
const ERROR_STATUS: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/** An `event: error` inside a 200 stream. An unknown type is taken as the API's own failure (500). */
function streamedError(call: UpstreamCall, error: unknown): Error {
  const type = stringField(error, 'type') ?? 'unknown_error';
  const status = ERROR_STATUS[type] ?? 500;
  const message = stringField(error, 'message') ?? type;
  return upstreamError(call, `${call.label} failed while streaming (${type}): ${message}`, status, isRetryableStatus(status));
}
