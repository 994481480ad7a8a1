import type { OpenTransaction, Queryable } from '../db/index.js';
import type { EventInput } from '../events.js';
import type { AgentSpec, AgentStatus, FleetSpec, FleetStatus, ScheduleSpec, ScheduleStatus, SessionSpec, SessionStatus, SnapshotSpec, SnapshotStatus, WarmPoolSpec, WarmPoolStatus } from '@berth/crds';

/** Spec and status of each kind the stores hold. */
export interface ResourceKinds {
  Session: { spec: SessionSpec; status: SessionStatus };
  Agent: { spec: AgentSpec; status: AgentStatus };
  Snapshot: { spec: SnapshotSpec; status: SnapshotStatus };
  Schedule: { spec: ScheduleSpec; status: ScheduleStatus };
  Fleet: { spec: FleetSpec; status: FleetStatus };
  WarmPool: { spec: WarmPoolSpec; status: WarmPoolStatus };
}
export type Kind = keyof ResourceKinds;
export type SpecOf<K extends Kind> = ResourceKinds[K]['spec'];
export type StatusOf<K extends Kind> = ResourceKinds[K]['status'];

export interface OwnerReference {
  kind: Kind;
  name: string;
  uid: string;
  controller?: boolean;
}

export interface ObjectMeta {
  name: string;
  uid: string;
  resourceVersion: string;
  generation: number;
  creationTimestamp: string;
  deletionTimestamp?: string;
  labels: Record<string, string>;
  finalizers: string[];
  ownerReferences: OwnerReference[];
}

export interface Resource<K extends Kind = Kind> {
  kind: K;
  metadata: ObjectMeta;
  spec: SpecOf<K>;
  status?: StatusOf<K>;
}

export interface CreateInput<K extends Kind> {
  name: string;
  labels?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  spec: SpecOf<K>;
  status?: StatusOf<K>;
}

export interface ListOptions {
  /** Every pair must match. */
  labels?: Record<string, string>;
  limit?: number;
  /** Continue after this name (exclusive), in the chosen order. */
  after?: string;
  order?: 'asc' | 'desc';
}

export interface ListResult<K extends Kind> {
  items: Resource<K>[];
  hasMore: boolean;
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  name: string;
  resourceVersion: string;
  /**
   * The object as the write left it, when the store has it at hand without a read (a committed
   * write of this process on PostgreSQL); shared by every watcher, which must not change it.
   */
  object?: Resource;
}

export interface WatchHandlers {
  onEvent(event: WatchEvent): void;
  /** Events may have been missed (a reconnect): the watcher must relist. */
  onResync(): void;
}

export interface Watch {
  /** Resolves once events are flowing: list after this, and nothing falls between list and watch. */
  ready: Promise<void>;
  stop(): void;
}

export interface WriteOptions {
  /** Optimistic concurrency: fail with `Conflict` unless the stored object is at this version. */
  resourceVersion?: string;
  /**
   * Rows of the database that go with the write (the events a reconcile records), written before
   * it. Where the store keeps its objects in PostgreSQL they are written in the write's own
   * transaction (`db`), so both take one commit, and a write that fails (Conflict, NotFound) leaves
   * none of them; elsewhere (Kubernetes) `db` is undefined and they are written on their own, first.
   */
  alongside?: (db: Queryable | undefined) => Promise<void>;
  /**
   * Events that the write makes true (`recordEvent`'s rows, each unless its occurrence was written
   * already), recorded at `at`. Where the store keeps its objects in PostgreSQL they are inserted
   * by the write's own statement: one round trip, in the write's commit, and none of them when the
   * write does not match (Conflict, NotFound). Elsewhere (Kubernetes) they are recorded first, on
   * their own, through `db`.
   */
  events?: { events: readonly EventInput[]; at: Date; db: Queryable };
  /**
   * A transaction begun by the store's `beginTransaction` that the write joins and ends: committed
   * with the write (and what goes alongside), rolled back when the write fails. What the caller
   * wrote in it before (a warm claim, ADR 45) commits with the write, or not at all.
   */
  within?: OpenTransaction;
  /**
   * Objects created with the write, each unless one of its kind and name exists already (taken as
   * made by an earlier attempt). Where the store keeps its objects in PostgreSQL they are created
   * in the write's own transaction, so the write and the objects take one commit, and a write that
   * fails creates none of them; elsewhere (Kubernetes) they are created first, on their own.
   */
  creates?: readonly CreateRequest[];
}

/** An object to create, with its kind: `WriteOptions.creates`. */
export type CreateRequest = { [K in Kind]: { kind: K; input: CreateInput<K> } }[Kind];

/**
 * The one interface controllers and the API server see, whether the resources
 * live in PostgreSQL (embedded mode) or as custom resources in a cluster.
 */
export interface ResourceStore {
  get<K extends Kind>(kind: K, name: string): Promise<Resource<K> | undefined>;
  /**
   * The object and its owner of `ownerKind` (the first owner reference of that kind), read
   * together: the hot path that needs both (an exec reads its agent and the agent's session)
   * pays one read of the store, not two. The owner is undefined when there is none, or it is gone.
   */
  getWithOwner<K extends Kind, O extends Kind>(kind: K, name: string, ownerKind: O): Promise<{ resource?: Resource<K>; owner?: Resource<O> }>;
  list<K extends Kind>(kind: K, options?: ListOptions): Promise<ListResult<K>>;
  create<K extends Kind>(kind: K, input: CreateInput<K>): Promise<Resource<K>>;
  /**
   * Changes the spec under optimistic concurrency: `mutate` sees the current object
   * and returns the new spec, or `undefined` for no change. Bumps `generation`.
   */
  updateSpec<K extends Kind>(
    kind: K,
    name: string,
    mutate: (current: Resource<K>) => SpecOf<K> | undefined,
  ): Promise<Resource<K>>;
  /** Replaces the status; the spec is untouched and `generation` does not move. */
  updateStatus<K extends Kind>(kind: K, name: string, status: StatusOf<K>, options?: WriteOptions): Promise<Resource<K>>;
  /**
   * A transaction of the database this store keeps its objects in, for rows that must commit with
   * a status write (`WriteOptions.within`). Only a store whose objects are rows of that database
   * has it (PostgreSQL); the Kubernetes store has no transaction to share.
   */
  beginTransaction?(): Promise<OpenTransaction>;
  /** Marks for deletion when finalizers remain, removes otherwise (and cascades to owned objects). */
  delete(kind: Kind, name: string): Promise<void>;
  removeFinalizer(kind: Kind, name: string, finalizer: string): Promise<void>;
  watch(kind: Kind, handlers: WatchHandlers): Watch;
  close(): Promise<void>;
}

export type StoreErrorReason = 'NotFound' | 'AlreadyExists' | 'Conflict';

export class StoreError extends Error {
  constructor(
    readonly reason: StoreErrorReason,
    readonly kind: Kind,
    readonly objectName: string,
    message?: string,
  ) {
    super(message ?? `${kind} ${objectName}: ${reason}`);
    this.name = 'StoreError';
  }
}

export function isStoreError(error: unknown, reason?: StoreErrorReason): error is StoreError {
  return error instanceof StoreError && (reason === undefined || error.reason === reason);
}

export const Labels = {
  organization: 'berth.dev/organization',
  mode: 'berth.dev/mode',
  session: 'berth.dev/session',
  agent: 'berth.dev/agent',
  userHash: 'berth.dev/user-hash',
  id: 'berth.dev/id',
} as const;
