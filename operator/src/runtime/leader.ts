import { ApiException, CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '@berth/common';

export interface LeaderElectionOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** The Lease's name: replicas that share it elect one leader. */
  name: string;
  /** This replica, as written into `holderIdentity` (the pod name in a cluster). */
  identity: string;
  log: Logger;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
}

/** How often a stopping leader tries to hand its Lease back when a renewal of its own wrote it meanwhile. */
const RELEASE_ATTEMPTS = 3;

/**
 * Leader election over a coordination.k8s.io Lease, as client-go does it: a replica takes the
 * Lease when it is free or its holder has not renewed it within the lease duration, renews it
 * every retry period, and gives up leadership when it cannot renew within the renew deadline.
 * Expiry is judged by when this replica last saw the Lease change, not by the timestamps in it,
 * so clock skew between replicas does not matter.
 */
export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private observed: { holder: string; renewTime: string; at: number } | undefined;
  private leading = false;
  private stopped = false;
  private wake: (() => void) | undefined;

  constructor(private readonly options: LeaderElectionOptions) {
    this.api = options.kubeConfig.makeApiClient(CoordinationV1Api);
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
  }

  isLeader(): boolean {
    return this.leading;
  }

  /**
   * Waits for leadership, calls `onStartedLeading`, keeps renewing, and calls `onStoppedLeading`
   * if leadership is lost. Resolves when stopped or when leadership is lost.
   */
  async run(callbacks: { onStartedLeading(): Promise<void> | void; onStoppedLeading(): void }): Promise<void> {
    while (!this.stopped && !(await this.tryAcquireOrRenew())) await this.sleep(this.retryPeriodMs);
    if (this.stopped) return;
    this.leading = true;
    this.options.log.info({ lease: this.options.name, identity: this.options.identity }, 'became the leader');
    await callbacks.onStartedLeading();
    let lastRenewal = Date.now();
    while (!this.stopped) {
      await this.sleep(this.retryPeriodMs);
      if (this.stopped) break;
      if (await this.tryAcquireOrRenew()) {
        lastRenewal = Date.now();
      } else if (Date.now() - lastRenewal > this.renewDeadlineMs) {
        this.leading = false;
        this.options.log.error({ lease: this.options.name }, 'lost leadership: could not renew the lease in time');
        callbacks.onStoppedLeading();
        return;
      }
    }
  }

  /** Stops electing; a leader hands the Lease back so that another replica takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    if (!this.leading) return;
    this.leading = false;
    for (let attempt = 1; ; attempt++) {
      try {
        const lease = await this.read();
        if (lease?.spec?.holderIdentity !== this.options.identity) return;
        await this.api.replaceNamespacedLease({
          name: this.options.name,
          namespace: this.options.namespace,
          body: { ...lease, spec: { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1, renewTime: new V1MicroTime() } },
        });
        this.options.log.info({ lease: this.options.name }, 'released the lease');
        return;
      } catch (error) {
        // 409: a renewal that was on its way when the stop came wrote the Lease after it was read
        // here; read it again, or the other replicas wait out the whole lease duration.
        if (attempt < RELEASE_ATTEMPTS && error instanceof ApiException && error.code === 409) continue;
        this.options.log.warn({ err: error }, 'could not release the lease; it expires by itself');
        return;
      }
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  private async read(): Promise<V1Lease | undefined> {
    try {
      return await this.api.readNamespacedLease({ name: this.options.name, namespace: this.options.namespace });
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return undefined;
      throw error;
    }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { name, namespace, identity } = this.options;
    const now = new V1MicroTime();
    const leaseDurationSeconds = Math.ceil(this.leaseDurationMs / 1000);
    try {
      const lease = await this.read();
      if (!lease) {
        await this.api.createNamespacedLease({
          namespace,
          body: {
            metadata: { name, namespace },
            spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
          },
        });
        return true;
      }
      const spec = lease.spec ?? {};
      const holder = spec.holderIdentity ?? '';
      const renewTime = spec.renewTime ? new Date(spec.renewTime).toISOString() : '';
      if (!this.observed || this.observed.holder !== holder || this.observed.renewTime !== renewTime) {
        this.observed = { holder, renewTime, at: Date.now() };
      }
      const duration = (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
      if (holder !== '' && holder !== identity && this.observed.at + duration > Date.now()) return false;
      const takingOver = holder !== identity;
      await this.api.replaceNamespacedLease({
        name,
        namespace,
        body: {
          ...lease,
          spec: {
            ...spec,
            holderIdentity: identity,
            leaseDurationSeconds,
            renewTime: now,
            ...(takingOver ? { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 } : {}),
          },
        },
      });
      return true;
    } catch (error) {
      // 409: another replica wrote first. Anything else: try again next period.
      if (!(error instanceof ApiException && error.code === 409)) {
        this.options.log.warn({ err: error, lease: name }, 'lease update failed');
      }
      return false;
    }
  }
}
