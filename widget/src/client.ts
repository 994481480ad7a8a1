import { ChatError } from './errors.js';
import type { PublicMessage } from './messages.js';

export interface SendResult {
  messageId: string;
  conversationId: string;
  /** The reply; `id` is the `messageId` of its stream events. */
  response: { id: string; role: string; content: string };
}

export interface History {
  conversationId: string | null;
  messages: (PublicMessage & { createdAt: string })[];
}

export interface ChannelConfig {
  channelId: string;
  type: string;
  theme?: unknown;
}

export interface StreamHandlers {
  onMessage(event: { messageId: string; role: string; content: string }): void;
  /** A piece of a reply as the model writes it. */
  onDelta(event: { messageId: string; text: string }): void;
  /** The stream is open (`connected`), after a first connection or a reconnection. */
  onConnected(): void;
  /** The server refused the stream (an error status: a limit, a refused origin, a gone channel); the browser does not retry. */
  onRefused(): void;
}

/** The channel's public routes for one visitor: no API key, the channel id is the access token. */
export interface ChatClient {
  config(): Promise<ChannelConfig>;
  history(limit?: number): Promise<History>;
  send(text: string): Promise<SendResult>;
  /** Opens the channel stream; the browser reconnects it when the server closes it. Returns its close. */
  stream(handlers: StreamHandlers): () => void;
}

export function createChatClient(apiBase: string, channelId: string, visitorId: string): ChatClient {
  // No cookies in either direction: the channel id and the visitor id are all the routes take.
  const url = (path: string, query: Record<string, string> = {}) => {
    const search = new URLSearchParams(query).toString();
    return `${apiBase}/channels/${encodeURIComponent(channelId)}${path}${search ? `?${search}` : ''}`;
  };
  return {
    async config() {
      return answer<ChannelConfig>(await fetch(url('/config'), { credentials: 'omit' }));
    },
    async history(limit = 50) {
      return answer<History>(await fetch(url('/messages', { visitorId, limit: String(limit) }), { credentials: 'omit' }));
    },
    async send(text) {
      const response = await fetch(url('/messages'), {
        method: 'POST',
        credentials: 'omit',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ text, visitorId }),
      });
      return answer<SendResult>(response);
    },
    stream(handlers) {
      const source = new EventSource(url('/stream', { visitorId }));
      source.addEventListener('connected', () => handlers.onConnected());
      source.addEventListener('message', (event) => {
        const data = parse((event as MessageEvent<string>).data);
        if (data && typeof data.messageId === 'string' && typeof data.role === 'string' && typeof data.content === 'string') {
          handlers.onMessage({ messageId: data.messageId, role: data.role, content: data.content });
        }
      });
      source.addEventListener('delta', (event) => {
        const data = parse((event as MessageEvent<string>).data);
        if (data && typeof data.messageId === 'string' && typeof data.text === 'string') handlers.onDelta({ messageId: data.messageId, text: data.text });
      });
      // A network error leaves the source connecting again by itself; an error status closes it.
      source.addEventListener('error', () => {
        if (source.readyState === EventSource.CLOSED) handlers.onRefused();
      });
      return () => source.close();
    },
  };
}

function parse(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

async function answer<T>(response: Response): Promise<T> {
  const body = parse(await response.text());
  if (response.ok && body) return body as T;
  const error = (body?.error ?? {}) as { code?: unknown; message?: unknown; details?: { retryAfter?: unknown } };
  const header = Number(response.headers.get('Retry-After'));
  const retryAfter =
    typeof error.details?.retryAfter === 'number' ? error.details.retryAfter : Number.isFinite(header) && header > 0 ? header : undefined;
  throw new ChatError(
    typeof error.message === 'string' ? error.message : `HTTP ${response.status}`,
    response.status,
    typeof error.code === 'string' ? error.code : 'unknown',
    retryAfter,
  );
}
