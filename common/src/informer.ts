import { makeInformer, type KubeConfig, type KubernetesObject, type ObjectCache } from '@kubernetes/client-node';
import type { Logger } from './log.js';

const FIRST_RESTART_DELAY_MS = 500;
const MAX_RESTART_DELAY_MS = 30_000;

export interface ResilientInformer<T extends KubernetesObject> {
  cache: ObjectCache<T>;
  /** Resolves once a list has succeeded and filled the cache; never before. */
  synced: Promise<void>;
  /** Whether the cache is filled and its watch has not failed since. */
  isSynced(): boolean;
  stop(): Promise<void>;
}

export interface InformerHandlers<T> {
  onChange(object: T, type: 'ADDED' | 'MODIFIED' | 'DELETED'): void;
  /** The watch failed and was restarted: changes in between may have been missed. */
  onRestart?(): void;
}

/**
 * An informer (list, then watch, with its cache) that keeps going: client-node relists by
 * itself after 410 Gone but stops on any other error, so this restarts it with exponential
 * backoff, and reports itself synced only after a list has actually succeeded (`start()`
 * also resolves when the list failed).
 */
export function startInformer<T extends KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>,
  handlers: InformerHandlers<T>,
  options: { labelSelector?: string; log: Logger; what: string },
): ResilientInformer<T> {
  let listed = false;
  let healthy = false;
  let stopped = false;
  let restartDelayMs = FIRST_RESTART_DELAY_MS;
  let restartTimer: NodeJS.Timeout | undefined;
  let resolveSynced!: () => void;
  const synced = new Promise<void>((resolve) => (resolveSynced = resolve));

  const informer = makeInformer<T>(
    kubeConfig,
    path,
    async () => {
      const result = await list();
      listed = true;
      return result as Awaited<ReturnType<typeof list>> & { apiVersion?: string; kind?: string };
    },
    options.labelSelector,
  );
  informer.on('add', (object) => handlers.onChange(object, 'ADDED'));
  informer.on('update', (object) => handlers.onChange(object, 'MODIFIED'));
  informer.on('delete', (object) => handlers.onChange(object, 'DELETED'));

  const begin = (restart: boolean) => {
    listed = false;
    informer
      .start()
      .then(() => {
        // start() resolves after the list was applied and the watch opened, or after a failure.
        if (!listed || stopped) return;
        healthy = true;
        restartDelayMs = FIRST_RESTART_DELAY_MS;
        resolveSynced();
        if (restart) handlers.onRestart?.();
      })
      .catch(() => undefined); // a failed start also emits `error`, which schedules the next try
  };
  informer.on('error', (error) => {
    healthy = false;
    if (stopped || restartTimer) return;
    options.log.warn({ err: error, informer: options.what, retryInMs: restartDelayMs }, 'watch failed; restarting it');
    restartTimer = setTimeout(() => {
      restartTimer = undefined;
      if (!stopped) begin(true);
    }, restartDelayMs);
    restartTimer.unref();
    restartDelayMs = Math.min(restartDelayMs * 2, MAX_RESTART_DELAY_MS);
  });
  begin(false);

  return {
    cache: informer,
    synced,
    isSynced: () => healthy && !stopped,
    async stop() {
      stopped = true;
      clearTimeout(restartTimer);
      await informer.stop();
    },
  };
}
