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
}

/** Key of a reply shown from the answer to the visitor's message `<id>`: `reply:<id>`. */
const REPLY_KEY = 'reply:';

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
 * The answer to `POST /channels/:id/messages`: the visitor's message gets its id, and the reply is
 * shown unless the stream delivered it already (the same role and content after the visitor's message).
 */
export function confirmSent(
  list: readonly ShownMessage[],
  localKey: string,
  messageId: string,
  reply: { role: string; content: string } | undefined,
): ShownMessage[] {
  const index = list.findIndex((message) => message.key === localKey);
  // The stream may have acknowledged the visitor's message already, under its id.
  const at = index >= 0 ? index : list.findIndex((message) => message.id === messageId);
  const next = list.map((message, i) =>
    i === index ? { key: message.key, id: messageId, role: message.role, content: message.content } : message,
  );
  if (!reply || reply.content === '') return next;
  const seen = next.slice(at + 1).some((message) => message.role === reply.role && message.content === reply.content);
  if (seen) return next;
  return [...next, { key: `${REPLY_KEY}${messageId}`, role: reply.role, content: reply.content }];
}

/**
 * A `message` event of the channel stream. A known id updates that message (a reply streamed in
 * parts keeps its id); the visitor's own pending message, or a reply shown from the request's
 * answer, takes the id; anything else is new.
 */
export function applyStreamed(list: readonly ShownMessage[], event: { messageId: string; role: string; content: string }): ShownMessage[] {
  const known = list.findIndex((message) => message.id === event.messageId);
  if (known >= 0) {
    return list.map((message, i) => (i === known ? { ...message, content: event.content } : message));
  }
  const unmatched = list.findIndex(
    (message) => message.id === undefined && message.role === event.role && message.content === event.content,
  );
  if (unmatched >= 0) {
    return list.map((message, i) => (i === unmatched ? { ...message, id: event.messageId } : message));
  }
  return [...list, { key: event.messageId, id: event.messageId, role: event.role, content: event.content }];
}

/**
 * History fetched while the list holds messages: the history is the truth for every message it
 * holds; messages it does not hold yet (still on their way, or newer than it) stay after it.
 * Elements keep their keys, so a screen reader's log does not announce them again.
 */
export function mergeHistory(list: readonly ShownMessage[], history: readonly PublicMessage[]): ShownMessage[] {
  let merged: ShownMessage[] = [];
  for (const message of history) merged = applyStreamed(merged, { messageId: message.id, role: message.role, content: message.content });
  const inHistory = new Set(history.map((message) => message.id));
  const keyOf = new Map<string, string>();
  for (const message of list) if (message.id !== undefined) keyOf.set(message.id, message.key);
  merged = merged.map((message) => ({ ...message, key: keyOf.get(message.id!) ?? message.key }));
  const rest = list.filter((message) => message.id === undefined || !inHistory.has(message.id));
  // A reply shown from a request's answer, without its id, that the history now holds with one.
  const remaining = rest.filter((message) => {
    if (message.id !== undefined || !message.key.startsWith(REPLY_KEY)) return true;
    const answered = merged.findIndex((m) => m.id === message.key.slice(REPLY_KEY.length));
    return !(answered >= 0 && merged.slice(answered + 1).some((m) => m.role === message.role && m.content === message.content));
  });
  return [...merged, ...remaining];
}
