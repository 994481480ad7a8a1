import { randomUUID } from 'node:crypto';
import { LATENCY_BUCKETS, type Kind, type Logger, type ResourceStore, type Watch, type WatchEvent } from '@berth/common';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { WorkQueue } from './workqueue.js';

export interface ReconcileResult {
  /** Reconcile again after this long even if nothing changes (deadlines, health checks). */
  requeueAfterMs?: number;
  /**
   * The resourceVersion of the object as this reconcile's own write left it: the watch's event of
   * that write does not reconcile the object again (what it would read is what this reconcile
   * decided). Any other change heard meanwhile does.
   */
  wroteVersion?: string;
}

export type Reconciler = (name: string, log: Logger) => Promise<ReconcileResult>;

export interface ControllerOptions {
  kind: Kind;
  store: ResourceStore;
  reconcile: Reconciler;
  log: Logger;
  metrics: ControllerMetrics;
  workers?: number;
  /** Every object is reconciled at least this often, whatever the watch says. */
  resyncPeriodMs?: number;
}

export interface ControllerMetrics {
  reconciles: Counter<'kind' | 'result'>;
  duration: Histogram<'kind'>;
  depth: Gauge<'kind'>;
  /** Watch events of a reconcile's own write, which did not reconcile the object again. */
  ownWrites: Counter<'kind'>;
}

export function createControllerMetrics(registry: Registry): ControllerMetrics {
  return {
    reconciles: new Counter({
      name: 'berth_reconcile_total',
      help: 'Reconciles by kind and result (success, requeue, error)',
      labelNames: ['kind', 'result'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'berth_reconcile_duration_seconds',
      help: 'Time spent in one reconcile',
      labelNames: ['kind'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    depth: new Gauge({
      name: 'berth_workqueue_depth',
      help: 'Keys waiting in a controller work queue',
      labelNames: ['kind'],
      registers: [registry],
    }),
    ownWrites: new Counter({
      name: 'berth_reconcile_own_writes_total',
      help: "Watch events of a reconcile's own status write, heard while it ran, that did not reconcile the object again",
      labelNames: ['kind'],
      registers: [registry],
    }),
  };
}

/**
 * One controller per kind: the watch and a periodic resync feed keys into a work queue;
 * workers reconcile them, level-triggered, and requeue on error with backoff.
 */
export class Controller {
  private readonly queue: WorkQueue;
  private watch: Watch | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private workers: Promise<void>[] = [];
  private stopped = false;
  /** The watch's events heard for each key while it is being reconciled, looked at when its reconcile ends. */
  private readonly heardDuring = new Map<string, WatchEvent[]>();

  constructor(private readonly options: ControllerOptions) {
    this.queue = new WorkQueue({ onDepthChange: (depth) => options.metrics.depth.set({ kind: options.kind }, depth) });
    options.metrics.depth.set({ kind: options.kind }, 0);
  }

  async start(): Promise<void> {
    const { store, kind } = this.options;
    this.watch = store.watch(kind, {
      onEvent: (event) => this.heard(event),
      onResync: () => void this.enqueueAll(),
    });
    await this.watch.ready;
    await this.enqueueAll();
    const resyncPeriodMs = this.options.resyncPeriodMs ?? 5 * 60_000;
    this.resyncTimer = setInterval(() => void this.enqueueAll(), resyncPeriodMs);
    this.resyncTimer.unref();
    for (let i = 0; i < (this.options.workers ?? 2); i++) this.workers.push(this.work());
    this.options.log.info({ kind, workers: this.workers.length }, 'controller started');
  }

  private heard(event: WatchEvent): void {
    const during = this.heardDuring.get(event.name);
    if (during) during.push(event);
    else this.queue.add(event.name);
  }

  /**
   * After a reconcile: the key runs again if a change was heard during it, unless the only
   * change was the reconcile's own write (`wroteVersion`). Skipping that one saves a reconcile
   * per status write, which would otherwise start right when the write is answered to whoever
   * waits for it (a `GET ?waitFor=`), and compete with that answer for the CPU.
   */
  private afterReconcile(name: string, wroteVersion: string | undefined): void {
    const heard = this.heardDuring.get(name) ?? [];
    this.heardDuring.delete(name);
    const own = (event: WatchEvent) => event.type === 'MODIFIED' && event.resourceVersion === wroteVersion;
    if (heard.some((event) => !own(event))) this.queue.add(name);
    else if (heard.length > 0) this.options.metrics.ownWrites.inc({ kind: this.options.kind });
  }

  /** Asks for a reconcile of one object, e.g. when something it owns outside the store changed. */
  enqueue(name: string): void {
    this.queue.add(name);
  }

  /** Asks for a reconcile of one object in `delayMs` (an earlier request for it wins). */
  enqueueAfter(name: string, delayMs: number): void {
    this.queue.addAfter(name, delayMs);
  }

  /** Asks for a reconcile of every object, e.g. after notifications about them may have been missed. */
  resync(): void {
    void this.enqueueAll();
  }

  private async enqueueAll(): Promise<void> {
    try {
      const { items } = await this.options.store.list(this.options.kind);
      for (const item of items) this.queue.add(item.metadata.name);
    } catch (error) {
      this.options.log.error({ err: error, kind: this.options.kind }, 'relist failed; the next resync retries');
    }
  }

  private async work(): Promise<void> {
    const { kind, metrics } = this.options;
    for (;;) {
      const name = await this.queue.get();
      if (name === undefined) return;
      const log = this.options.log.child({ kind, name, reconcileId: randomUUID() });
      const stopTimer = metrics.duration.startTimer({ kind });
      this.heardDuring.set(name, []);
      let wroteVersion: string | undefined;
      try {
        const result = await this.options.reconcile(name, log);
        wroteVersion = result.wroteVersion;
        this.queue.forget(name);
        if (result.requeueAfterMs !== undefined && !this.stopped) this.queue.addAfter(name, result.requeueAfterMs);
        metrics.reconciles.inc({ kind, result: result.requeueAfterMs !== undefined ? 'requeue' : 'success' });
      } catch (error) {
        metrics.reconciles.inc({ kind, result: 'error' });
        const retryInMs = this.stopped ? undefined : this.queue.addRateLimited(name);
        log.warn({ err: error, retryInMs, failures: this.queue.failureCount(name) }, 'reconcile failed');
      } finally {
        stopTimer();
        this.afterReconcile(name, wroteVersion);
        this.queue.done(name);
      }
    }
  }

  /** Stops taking work and waits for reconciles in flight to finish. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.watch?.stop();
    clearInterval(this.resyncTimer);
    this.queue.shutDown();
    await Promise.all(this.workers);
    this.options.log.info({ kind: this.options.kind }, 'controller stopped');
  }
}
