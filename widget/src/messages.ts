/**
 * The conversation as the widget shows it, kept as an immutable list. Messages reach the widget
 * three ways: the history route (the truth, with ids), the channel stream (with ids, possibly
 * before the reply to the request that caused them) and the reply to the visitor's own request
 * (without the reply's id). These pure functions merge the three without showing a message twice.
 */

/** A message of the public routes: `GET /channels/:id/messages` and the stream's `message` event. */
export interface PublicMessage {
  id: string;
  role: string;
  content: string;
}

export interface ShownMessage {
  /** Stable key of the message's element: its id once known, a local key before. */
  key: string;
  /** The server's message id; absent while the visitor's message is on its way, or for a reply not yet seen with its id. */
  id?: string;
  role: string;
  content: string;
  /** The visitor's message, sent and not yet acknowledged. */
  pending?: boolean;
  /** A reply being written: its text so far, from the stream's `delta` events. */
  writing?: boolean;
}

export function fromHistory(messages: readonly PublicMessage[]): ShownMessage[] {
  return messages.map((message) => ({ key: message.id, id: message.id, role: message.role, content: message.content }));
}

/** The visitor's message, shown at once while its request is on its way. */
export function addPending(list: readonly ShownMessage[], localKey: string, text: string): ShownMessage[] {
  return [...list, { key: localKey, role: 'user', content: text, pending: true }];
}

/** A send that failed: its message leaves the list (the text goes back into the input). */
export function dropPending(list: readonly ShownMessage[], localKey: string): ShownMessage[] {
  return list.filter((message) => message.key !== localKey);
}

/** A send whose message was stored but not answered in time: no longer pending, waiting for its id from the stream or the history. */
export function keepUnanswered(list: readonly ShownMessage[], localKey: string): ShownMessage[] {
  return list.map((message) => (message.key === localKey ? { key: message.key, id: message.id, role: message.role, content: message.content } : message));
}

/**
 * The answer to `POST /channels/:id/messages`: the visitor's message gets its id, and the reply
 * (`response.id`, the id of its stream events) is shown whole, replacing what the stream wrote of it.
 */
export function confirmSent(
  list: readonly ShownMessage[],
  localKey: string,
  messageId: string,
  reply: { id: string; role: string; content: string },
): ShownMessage[] {
  const confirmed = list.map((message) =>
    message.key === localKey ? { key: message.key, id: messageId, role: message.role, content: message.content } : message,
  );
  // The stream may have shown the visitor's message under its id before this answer came.
  const once = confirmed.filter((message, i) => message.id !== messageId || confirmed.findIndex((m) => m.id === messageId) === i);
  return applyStreamed(once, { messageId: reply.id, role: reply.role, content: reply.content });
}

/**
 * A `delta` event: a piece of a reply the model is writing. The first piece shows the reply;
 * a reply already complete (its `message` came) takes no more pieces.
 */
export function applyDelta(list: readonly ShownMessage[], event: { messageId: string; text: string }): ShownMessage[] {
  const known = list.findIndex((message) => message.id === event.messageId);
  if (known < 0) return [...list, { key: event.messageId, id: event.messageId, role: 'assistant', content: event.text, writing: true }];
  const message = list[known]!;
  if (!message.writing) return [...list];
  return list.map((m, i) => (i === known ? { ...m, content: m.content + event.text } : m));
}

/**
 * A `message` event of the channel stream: a stored message, whole. A known id (a reply being
 * written, or shown from the request's answer) takes its final content; the visitor's own
 * pending message takes its id; anything else is new.
 */
export function applyStreamed(list: readonly ShownMessage[], event: { messageId: string; role: string; content: string }): ShownMessage[] {
  const stored = { id: event.messageId, role: event.role, content: event.content };
  const known = list.findIndex((message) => message.id === event.messageId);
  if (known >= 0) return list.map((message, i) => (i === known ? { key: message.key, ...stored } : message));
  if (event.role === 'user') {
    const mine = list.findIndex((message) => message.id === undefined && message.role === 'user' && message.content === event.content);
    if (mine >= 0) return list.map((message, i) => (i === mine ? { key: message.key, ...stored } : message));
  }
  return [...list, { key: event.messageId, ...stored }];
}

/**
 * History fetched while the list holds messages: the history is the truth for every message it
 * holds; messages it does not hold yet (on their way, being written, or newer) stay after it.
 * Elements keep their keys, so a screen reader's log does not announce them again.
 */
export function mergeHistory(list: readonly ShownMessage[], history: readonly PublicMessage[]): ShownMessage[] {
  const keyOf = new Map<string, string>();
  for (const message of list) if (message.id !== undefined) keyOf.set(message.id, message.key);
  const inHistory = new Set(history.map((message) => message.id));
  const merged = history.map((message) => ({ key: keyOf.get(message.id) ?? message.id, id: message.id, role: message.role, content: message.content }));
  // A pending message the history holds already keeps its place here until its answer names it (confirmSent).
  const rest = list.filter((message) => message.id === undefined || !inHistory.has(message.id));
  return [...merged, ...rest];
}
