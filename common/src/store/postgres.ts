import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Registry } from 'prom-client';
import type { Clock } from '../clock.js';
import { beginTransaction, isUniqueViolation, withTransaction, type OpenTransaction, type Queryable } from '../db/index.js';
import { NotificationListener } from '../db/listener.js';
import { eventsParameter, insertEventsFrom } from '../events.js';
import type { Logger } from '../log.js';
import {
  StoreError,
  type CreateInput,
  type Kind,
  type ListOptions,
  type ListResult,
  type Resource,
  type ResourceStore,
  type SpecOf,
  type StatusOf,
  type Watch,
  type WatchEvent,
  type WatchHandlers,
  type WriteOptions,
} from './types.js';

interface ResourceRow {
  kind: string;
  name: string;
  uid: string;
  resource_version: string;
  generation: string;
  labels: Record<string, string>;
  owner_references: Resource['metadata']['ownerReferences'];
  finalizers: string[];
  spec: unknown;
  status: unknown;
  created_at: Date;
  deletion_timestamp: Date | null;
}

const COLUMNS =
  'kind, name, uid, resource_version, generation, labels, owner_references, finalizers, spec, status, created_at, deletion_timestamp';

function toResource<K extends Kind>(row: ResourceRow): Resource<K> {
  const metadata: Resource<K>['metadata'] = {
    name: row.name,
    uid: row.uid,
    resourceVersion: row.resource_version,
    generation: Number(row.generation),
    creationTimestamp: row.created_at.toISOString(),
    labels: row.labels,
    finalizers: row.finalizers,
    ownerReferences: row.owner_references,
  };
  if (row.deletion_timestamp) metadata.deletionTimestamp = row.deletion_timestamp.toISOString();
  const resource: Resource<K> = { kind: row.kind as K, metadata, spec: row.spec as SpecOf<K> };
  if (row.status !== null) resource.status = row.status as StatusOf<K>;
  return resource;
}

/** A status write inside a transaction that matched no row: the transaction is rolled back. */
class NotWritten extends Error {}

/** Writes remembered as told to this process's watchers, so that the second way of telling is dropped. */
const TOLD_MAX = 10_000;

/**
 * Resources in one PostgreSQL table, with a global resourceVersion sequence and a
 * watch over LISTEN/NOTIFY. A dropped listener reconnects and tells every watcher to
 * relist, as a Kubernetes informer does after a 410 Gone.
 */
export class PostgresResourceStore implements ResourceStore {
  private readonly handlers = new Map<Kind, Set<WatchHandlers>>();
  /**
   * Writes already told to this process's watchers (type kind/name/resourceVersion: a delete keeps
   * the last version), by whichever way
   * came first: the write's own return, or its notification through PostgreSQL (which can reach
   * the listening connection before the writing one has its answer). The other way finds it here
   * and is not told twice. Bounded, oldest out first.
   */
  private readonly told = new Set<string>();
  /**
   * Objects this process is writing (kind/name), with the notifications heard for them meanwhile.
   * Those wait until the write has returned and been told with its object (ADR 45): the
   * notification of the write itself can reach the listening connection before the writing one
   * has its answer, and a watcher told by it would have to read what the write returns anyway.
   */
  private readonly writing = new Map<string, { writes: number; held: string[] }>();
  private readonly listener: NotificationListener;

  constructor(
    private readonly pool: pg.Pool,
    private readonly options: { connectionString: string; clock: Clock; log: Logger; metrics?: Registry },
  ) {
    this.listener = new NotificationListener({
      connectionString: options.connectionString,
      channels: ['berth_resources'],
      name: 'resource-watch',
      log: options.log,
      ...(options.metrics ? { metrics: options.metrics } : {}),
      onNotification: (_channel, payload) => this.dispatch(payload),
      // Whatever changed while disconnected is unknown: every watcher relists.
      onReconnect: () => this.resyncAll(),
    });
  }

  async get<K extends Kind>(kind: K, name: string, db: Queryable = this.pool): Promise<Resource<K> | undefined> {
    // Named (prepared): the runner reads its agent before every model call.
    const { rows } = await db.query<ResourceRow>({ name: 'berth_resource_get', text: `SELECT ${COLUMNS} FROM resources WHERE kind = $1 AND name = $2`, values: [kind, name] });
    return rows[0] ? toResource<K>(rows[0]) : undefined;
  }

  async getWithOwner<K extends Kind, O extends Kind>(kind: K, name: string, ownerKind: O): Promise<{ resource?: Resource<K>; owner?: Resource<O> }> {
    if ((ownerKind as Kind) === kind) throw new Error(`getWithOwner: an owner of the same kind (${kind}) cannot be told from its object`);
    // One statement, one snapshot: the owner as it was when the object was read.
    const { rows } = await this.pool.query<ResourceRow>({
      name: 'berth_resource_get_with_owner',
      text: `SELECT ${COLUMNS} FROM resources WHERE kind = $1 AND name = $2
        UNION ALL
        SELECT ${COLUMNS} FROM resources WHERE kind = $3 AND name = (
          SELECT reference ->> 'name' FROM resources object, jsonb_array_elements(object.owner_references) reference
          WHERE object.kind = $1 AND object.name = $2 AND reference ->> 'kind' = $3 LIMIT 1)`,
      values: [kind, name, ownerKind],
    });
    const resource = rows.find((row) => row.kind === kind);
    const owner = rows.find((row) => row.kind === ownerKind);
    return { ...(resource ? { resource: toResource<K>(resource) } : {}), ...(owner ? { owner: toResource<O>(owner) } : {}) };
  }

  async list<K extends Kind>(kind: K, options: ListOptions = {}): Promise<ListResult<K>> {
    const params: unknown[] = [kind];
    const where = ['kind = $1'];
    if (options.labels && Object.keys(options.labels).length > 0) {
      params.push(JSON.stringify(options.labels));
      where.push(`labels @> $${params.length}::jsonb`);
    }
    const descending = options.order === 'desc';
    if (options.after !== undefined) {
      params.push(options.after);
      where.push(`name ${descending ? '<' : '>'} $${params.length}`);
    }
    let limitClause = '';
    if (options.limit !== undefined) {
      params.push(options.limit + 1);
      limitClause = `LIMIT $${params.length}`;
    }
    const { rows } = await this.pool.query<ResourceRow>(
      `SELECT ${COLUMNS} FROM resources WHERE ${where.join(' AND ')}
       ORDER BY name ${descending ? 'DESC' : 'ASC'} ${limitClause}`,
      params,
    );
    const hasMore = options.limit !== undefined && rows.length > options.limit;
    const page = hasMore ? rows.slice(0, options.limit) : rows;
    return { items: page.map((row) => toResource<K>(row)), hasMore };
  }

  async create<K extends Kind>(kind: K, input: CreateInput<K>): Promise<Resource<K>> {
    const writeDone = this.startWriting(kind, input.name);
    try {
      const created = await this.insert(this.pool, kind, input, false);
      return this.tellLocally('ADDED', created!);
    } catch (error) {
      if (isUniqueViolation(error)) throw new StoreError('AlreadyExists', kind, input.name);
      throw error;
    } finally {
      writeDone();
    }
  }

  /** Inserts the object; with `ifAbsent`, nothing (undefined) when one of its kind and name exists. */
  private async insert<K extends Kind>(db: Queryable, kind: K, input: CreateInput<K>, ifAbsent: boolean): Promise<Resource<K> | undefined> {
    const { rows } = await db.query<ResourceRow>(
      `INSERT INTO resources (kind, name, uid, resource_version, labels, owner_references, finalizers, spec, status, created_at)
       VALUES ($1, $2, $3, nextval('resource_version_seq'), $4, $5, $6, $7, $8, $9)
       ${ifAbsent ? 'ON CONFLICT (kind, name) DO NOTHING' : ''}
       RETURNING ${COLUMNS}`,
      [
          kind,
          input.name,
          randomUUID(),
          JSON.stringify(input.labels ?? {}),
          JSON.stringify(input.ownerReferences ?? []),
          input.finalizers ?? [],
          JSON.stringify(input.spec),
          input.status === undefined ? null : JSON.stringify(input.status),
          this.options.clock.now(),
      ],
    );
    return rows[0] ? toResource<K>(rows[0]) : undefined;
  }

  async updateSpec<K extends Kind>(
    kind: K,
    name: string,
    mutate: (current: Resource<K>) => SpecOf<K> | undefined,
  ): Promise<Resource<K>> {
    let changed = false;
    const writeDone = this.startWriting(kind, name);
    try {
      const result = await withTransaction(this.pool, async (tx) => {
        const { rows } = await tx.query<ResourceRow>(
          `SELECT ${COLUMNS} FROM resources WHERE kind = $1 AND name = $2 FOR UPDATE`,
          [kind, name],
        );
        if (!rows[0]) throw new StoreError('NotFound', kind, name);
        const current = toResource<K>(rows[0]);
        const spec = mutate(current);
        if (spec === undefined) return current;
        const updated = await tx.query<ResourceRow>(
          `UPDATE resources SET spec = $3, generation = generation + 1, resource_version = nextval('resource_version_seq')
           WHERE kind = $1 AND name = $2 RETURNING ${COLUMNS}`,
          [kind, name, JSON.stringify(spec)],
        );
        changed = true;
        return toResource<K>(updated.rows[0]!);
      });
      // After the commit: a watcher that reads the object now sees the change.
      return changed ? this.tellLocally('MODIFIED', result) : result;
    } finally {
      writeDone();
    }
  }

  async updateStatus<K extends Kind>(
    kind: K,
    name: string,
    status: StatusOf<K>,
    options: WriteOptions = {},
  ): Promise<Resource<K>> {
    const events = options.events && options.events.events.length > 0 ? options.events : undefined;
    const update = async (db: Queryable): Promise<ResourceRow | undefined> => {
      const values = [kind, name, JSON.stringify(status), options.resourceVersion ?? null];
      // The events go in the same statement, inserted only when the write matched.
      const { rows } = await db.query<ResourceRow>(
        `WITH updated AS (
           UPDATE resources SET status = $3, resource_version = nextval('resource_version_seq')
            WHERE kind = $1 AND name = $2 AND ($4::bigint IS NULL OR resource_version = $4::bigint)
           RETURNING ${COLUMNS}
         )${events ? `, recorded AS (${insertEventsFrom('$5', 'EXISTS (SELECT 1 FROM updated)')})` : ''}
         SELECT ${COLUMNS} FROM updated`,
        events ? [...values, eventsParameter(events.events, events.at)] : values,
      );
      return rows[0];
    };
    const { alongside, within, creates = [] } = options;
    const writeDone = this.startWriting(kind, name);
    try {
      const created: Resource[] = [];
      // What goes with the write: the rows alongside, then the objects created with it.
      const withWrite = async (tx: Queryable): Promise<ResourceRow | undefined> => {
        await alongside?.(tx);
        for (const { kind: createdKind, input } of creates) {
          const object = await this.insert(tx, createdKind, input as CreateInput<typeof createdKind>, true);
          if (object) created.push(object);
        }
        return update(tx);
      };
      const row = within
        ? await this.writeWithin(within, withWrite)
        : alongside || creates.length > 0
          ? await withTransaction(this.pool, async (tx) => {
              const written = await withWrite(tx);
              // Not written: what went alongside, and what was created with it, is rolled back with it.
              if (!written) throw new NotWritten();
              return written;
            }).catch((error: unknown) => {
              if (error instanceof NotWritten) return undefined;
              throw error;
            })
          : await update(this.pool);
      // After the commit: a watcher that reads the object now sees the change. A write that did not
      // match was rolled back with what it created.
      if (row) for (const object of created) this.tellLocally('ADDED', object);
      if (row) return this.tellLocally('MODIFIED', toResource<K>(row));
    } finally {
      writeDone();
    }
    const exists = await this.get(kind, name);
    throw new StoreError(exists ? 'Conflict' : 'NotFound', kind, name);
  }

  beginTransaction(): Promise<OpenTransaction> {
    return beginTransaction(this.pool);
  }

  /** Writes in a transaction begun earlier and ends it: committed when the write matched, else rolled back. */
  private async writeWithin(tx: OpenTransaction, write: (db: Queryable) => Promise<ResourceRow | undefined>): Promise<ResourceRow | undefined> {
    if (tx.ended) throw new Error('updateStatus: the transaction to write within has ended');
    try {
      const written = await write(tx.client);
      if (!written) {
        await tx.rollback();
        return undefined;
      }
      await tx.commit();
      return written;
    } catch (error) {
      await tx.rollback();
      throw error;
    }
  }

  async delete(kind: Kind, name: string): Promise<void> {
    await withTransaction(this.pool, async (tx) => {
      const { rows } = await tx.query<ResourceRow>(
        `SELECT ${COLUMNS} FROM resources WHERE kind = $1 AND name = $2 FOR UPDATE`,
        [kind, name],
      );
      if (!rows[0]) throw new StoreError('NotFound', kind, name);
      await this.deleteOrMark(tx, toResource(rows[0]));
    });
  }

  async removeFinalizer(kind: Kind, name: string, finalizer: string): Promise<void> {
    await withTransaction(this.pool, async (tx) => {
      const { rows } = await tx.query<ResourceRow>(
        `UPDATE resources SET finalizers = array_remove(finalizers, $3), resource_version = nextval('resource_version_seq')
         WHERE kind = $1 AND name = $2 AND $3 = ANY(finalizers) RETURNING ${COLUMNS}`,
        [kind, name, finalizer],
      );
      const updated = rows[0] ? toResource(rows[0]) : undefined;
      if (updated?.metadata.deletionTimestamp && updated.metadata.finalizers.length === 0) {
        await this.deleteOrMark(tx, updated);
      }
    });
  }

  /** Objects with finalizers are only marked; the rest go, and what they own follows them. */
  private async deleteOrMark(tx: pg.PoolClient, resource: Resource): Promise<void> {
    const { kind, name, finalizers, uid } = { kind: resource.kind, ...resource.metadata };
    if (finalizers.length > 0) {
      if (!resource.metadata.deletionTimestamp) {
        await tx.query(
          `UPDATE resources SET deletion_timestamp = $3, resource_version = nextval('resource_version_seq')
           WHERE kind = $1 AND name = $2`,
          [kind, name, this.options.clock.now()],
        );
      }
      return;
    }
    await tx.query('DELETE FROM resources WHERE kind = $1 AND name = $2', [kind, name]);
    const dependents = await tx.query<ResourceRow>(
      `SELECT ${COLUMNS} FROM resources WHERE owner_references @> $1::jsonb FOR UPDATE`,
      [JSON.stringify([{ uid }])],
    );
    for (const row of dependents.rows) await this.deleteOrMark(tx, toResource(row));
  }

  watch(kind: Kind, handlers: WatchHandlers): Watch {
    let set = this.handlers.get(kind);
    if (!set) this.handlers.set(kind, (set = new Set()));
    set.add(handlers);
    return {
      ready: this.ensureListening(),
      stop: () => {
        set.delete(handlers);
      },
    };
  }

  /** Resolves once the listener is connected, or has failed once and goes on trying (watchers then relist). */
  ensureListening(): Promise<void> {
    return this.listener.start().catch(() => undefined);
  }

  private resyncAll(): void {
    for (const set of this.handlers.values()) for (const handlers of set) handlers.onResync();
  }

  /**
   * A write of this process, committed, is told to this process's watchers at once rather than
   * after its notification's trip through PostgreSQL (in embedded mode the API server and the
   * operator share this store: a created agent's reconcile, and a caller waiting for its status,
   * start without that trip). Other processes learn of it by the notification, as before.
   */
  private tellLocally<K extends Kind>(type: WatchEvent['type'], resource: Resource<K>): Resource<K> {
    const set = this.handlers.get(resource.kind as Kind);
    if (!set || set.size === 0) return resource;
    if (!this.firstTelling(`${type} ${resource.kind}/${resource.metadata.name}/${resource.metadata.resourceVersion}`)) return resource;
    // A copy: the writer gets `resource` back and may change it; the watchers share this one.
    const object = structuredClone(resource) as Resource;
    for (const handlers of [...set]) handlers.onEvent({ type, name: resource.metadata.name, resourceVersion: resource.metadata.resourceVersion, object });
    return resource;
  }

  /** Marks a write of the object under way; the function returned ends it and lets the notifications held meanwhile through. */
  private startWriting(kind: Kind, name: string): () => void {
    const key = `${kind}/${name}`;
    let entry = this.writing.get(key);
    if (!entry) this.writing.set(key, (entry = { writes: 0, held: [] }));
    entry.writes++;
    return () => {
      if (--entry.writes > 0) return;
      this.writing.delete(key);
      for (const payload of entry.held) this.dispatch(payload);
    };
  }

  /** Whether this write is told for the first time (and from now on, that it was). */
  private firstTelling(key: string): boolean {
    if (this.told.has(key)) return false;
    this.told.add(key);
    if (this.told.size > TOLD_MAX) this.told.delete(this.told.values().next().value!);
    return true;
  }

  private dispatch(payload: string | undefined): void {
    if (!payload) return;
    const event = JSON.parse(payload) as WatchEvent & { kind: Kind };
    const writing = this.writing.get(`${event.kind}/${event.name}`);
    if (writing) {
      writing.held.push(payload);
      return;
    }
    if (!this.firstTelling(`${event.type} ${event.kind}/${event.name}/${event.resourceVersion}`)) return;
    const set = this.handlers.get(event.kind);
    if (!set) return;
    for (const handlers of set) {
      handlers.onEvent({ type: event.type, name: event.name, resourceVersion: event.resourceVersion });
    }
  }

  async close(): Promise<void> {
    this.handlers.clear();
    await this.listener.close();
  }
}
