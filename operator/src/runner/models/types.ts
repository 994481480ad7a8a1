/**
 * The conversation as the agent loop keeps it, independent of any model vendor's wire format.
 * Adapters translate it to and from OpenAI chat completions and Anthropic messages.
 */
export interface ToolCall {
  /** The vendor's id of the call, echoed back with its result. */
  id: string;
  name: string;
  /** Parsed JSON arguments (an object); `{}` when the model sent none. */
  input: Record<string, unknown>;
  /**
   * The arguments exactly as the model sent them, present only when they were not a JSON
   * object (malformed, cut off by the token limit, or an array/string/number); `input` is then
   * `{}`. The loop should not run the tool but answer the call with an error that quotes this
   * text, so the model can correct itself. Adapters send `input` (`{}`) back to the vendor.
   */
  invalidInput?: string;
}

export type Message =
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls: ToolCall[] }
  | { role: 'tool'; toolCallId: string; name: string; content: string; isError: boolean };

export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema of the tool's input object. */
  inputSchema: Record<string, unknown>;
}

export interface ModelRequest {
  /** The model's own name at its vendor (`gpt-4o-mini`), without the `<vendor>/` prefix. */
  model: string;
  system?: string;
  messages: Message[];
  tools: ToolDefinition[];
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  signal?: AbortSignal;
  /** Called with each piece of text as the model streams it. */
  onText?: (text: string) => void;
}

export interface ModelResponse {
  text: string;
  toolCalls: ToolCall[];
  usage: { inputTokens: number; outputTokens: number };
  /** Why the model stopped: `end_turn`/`stop`, `tool_use`/`tool_calls`, `max_tokens`/`length`, ... as the vendor says it. */
  stopReason: string;
}

/** Where and how to reach one vendor's API. */
export interface ModelEndpoint {
  api: 'openai' | 'anthropic';
  baseUrl: string;
  apiKey?: string | undefined;
}

/** One vendor API: a streaming completion with tool use. Retries are the caller's. */
export interface ModelAdapter {
  complete(endpoint: ModelEndpoint, request: ModelRequest): Promise<ModelResponse>;
}

/**
 * The upstream answered with an error (or could not be reached). `status` is the upstream
 * HTTP status (0 when there was no answer); `retryable` for 429, 5xx and network failures.
 */
export class ModelError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly retryable: boolean,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'ModelError';
  }
}
