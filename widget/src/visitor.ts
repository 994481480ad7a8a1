/** What the widget needs of `localStorage`; tests pass a Map-backed one. */
export interface KeyValueStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

const VISITOR_ID = /^v_[0-9a-f]{32}$/;

export function visitorKey(channelId: string): string {
  return `berth-chat:${channelId}:visitor`;
}

/** A new visitor id: `v_` and 32 hex digits (128 random bits). */
export function newVisitorId(random: (bytes: Uint8Array<ArrayBuffer>) => Uint8Array): string {
  return `v_${[...random(new Uint8Array(16))].map((byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * The visitor's id for this channel: the one kept in storage, or a new one kept there. Storage
 * that refuses (blocked cookies, a full quota) gives an id for this page only.
 */
export function visitorId(storage: KeyValueStore | undefined, channelId: string, random: (bytes: Uint8Array<ArrayBuffer>) => Uint8Array): string {
  const key = visitorKey(channelId);
  try {
    const kept = storage?.getItem(key);
    if (kept && VISITOR_ID.test(kept)) return kept;
  } catch {
    // Reading storage can throw where the site's storage is blocked.
  }
  const id = newVisitorId(random);
  try {
    storage?.setItem(key, id);
  } catch {
    // Kept for this page only.
  }
  return id;
}
