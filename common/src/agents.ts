import type { Kind, Resource, ResourceStore } from './store/types.js';

/** Longest agent lifetime; longer timeouts are capped to it. */
export const MAX_TIMEOUT_SECONDS = 24 * 3600;

/** Waits, by watching, until the agent satisfies `done` or `timeoutMs` passes; answers it as last read (see `waitForResource`). */
export function waitForAgent(
  store: ResourceStore,
  name: string,
  timeoutMs: number,
  done: (agent: Resource<'Agent'> | undefined) => boolean,
): Promise<Resource<'Agent'> | undefined> {
  return waitForResource(store, 'Agent', name, timeoutMs, done);
}

/**
 * Waits, by watching, until the resource satisfies `done` (undefined: it is gone) or `timeoutMs`
 * passes, and answers it as last read: the one that satisfied `done`, or at the deadline the one
 * read then (which may not), so that the caller needs no read of its own.
 */
export async function waitForResource<K extends Kind>(
  store: ResourceStore,
  kind: K,
  name: string,
  timeoutMs: number,
  done: (resource: Resource<K> | undefined) => boolean,
): Promise<Resource<K> | undefined> {
  let wake: () => void = () => undefined;
  const watch = store.watch(kind, {
    onEvent: (event) => event.name === name && wake(),
    onResync: () => wake(),
  });
  const deadline = Date.now() + timeoutMs;
  try {
    await watch.ready;
    for (;;) {
      const changed = new Promise<void>((resolve) => (wake = resolve));
      const current = await store.get(kind, name);
      if (done(current)) return current;
      const remaining = deadline - Date.now();
      if (remaining <= 0) return current;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([changed, new Promise<void>((resolve) => (timer = setTimeout(resolve, remaining)))]);
      clearTimeout(timer);
    }
  } finally {
    watch.stop();
  }
}
