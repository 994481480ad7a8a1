import type { Kind, Resource, ResourceStore } from './store/types.js';

/** Longest agent lifetime; longer timeouts are capped to it. */
export const MAX_TIMEOUT_SECONDS = 24 * 3600;

/** Waits, by watching, until the agent satisfies `done` or `timeoutMs` passes; answers it as last read (see `waitForResource`). */
export function waitForAgent(
  store: ResourceStore,
  name: string,
  timeoutMs: number,
  done: (agent: Resource<'Agent'> | undefined) => boolean,
  options: { firstRead?: () => Promise<Resource<'Agent'> | undefined> } = {},
): Promise<Resource<'Agent'> | undefined> {
  return waitForResource(store, 'Agent', name, timeoutMs, done, options);
}

/**
 * Waits, by watching, until the resource satisfies `done` (undefined: it is gone) or `timeoutMs`
 * passes, and answers it as last seen: the one that satisfied `done`, or at the deadline the latest
 * one seen (which may not), so that the caller needs no read of its own.
 *
 * The watch starts before the first read (`firstRead`, by default a read of the store: a caller
 * that must check what it reads, e.g. its owner, passes its own), so no change falls between them.
 * After that, an event that carries the object as its write left it (a write of this process on
 * PostgreSQL) is looked at as it is, without a read: the waiter of a reconcile's status write
 * answers as soon as the write has committed. An event without its object, or a relist, is read.
 */
export async function waitForResource<K extends Kind>(
  store: ResourceStore,
  kind: K,
  name: string,
  timeoutMs: number,
  done: (resource: Resource<K> | undefined) => boolean,
  options: { firstRead?: () => Promise<Resource<K> | undefined> } = {},
): Promise<Resource<K> | undefined> {
  // What the watch told since the last look: nothing (undefined), the newest object its events
  // carried, or `read` when one of them carried none (or the watch relisted).
  let heard: { object?: Resource<K>; read?: true } | undefined;
  let wake: (() => void) | undefined;
  const watch = store.watch(kind, {
    onEvent: (event) => {
      if (event.name !== name) return;
      const object = event.object as Resource<K> | undefined;
      if (!object || heard?.read) heard = { read: true };
      else heard = { object: newer(heard?.object, object) };
      wake?.();
    },
    onResync: () => {
      heard = { read: true };
      wake?.();
    },
  });
  const deadline = Date.now() + timeoutMs;
  const read = () => store.get(kind, name);
  try {
    await watch.ready;
    let current = await (options.firstRead ?? read)();
    for (;;) {
      if (done(current)) return current;
      if (!heard) {
        const remaining = deadline - Date.now();
        if (remaining <= 0) return current;
        let timer: NodeJS.Timeout | undefined;
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, remaining);
        });
        wake = undefined;
        clearTimeout(timer);
        // The deadline, and nothing heard: what was seen last is still what there is.
        if (!heard) return current;
      }
      const news: { object?: Resource<K>; read?: true } = heard;
      heard = undefined;
      current = news.object ? newer(current, news.object) : await read();
    }
  } finally {
    watch.stop();
  }
}

/** The later of two versions of one object (by resourceVersion, a number on PostgreSQL); `told` when they cannot be compared. */
function newer<K extends Kind>(seen: Resource<K> | undefined, told: Resource<K>): Resource<K> {
  if (!seen) return told;
  const [a, b] = [seen.metadata.resourceVersion, told.metadata.resourceVersion];
  if (!/^\d+$/.test(a) || !/^\d+$/.test(b)) return told;
  return BigInt(b) >= BigInt(a) ? told : seen;
}
