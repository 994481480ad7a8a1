import {
  ApiException,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1ObjectMeta,
} from '@kubernetes/client-node';
import { API_VERSION, GROUP, KINDS, VERSION } from '@berth/crds';
import { recordEvents } from '../events.js';
import { startInformer, type ResilientInformer } from '../informer.js';
import type { Logger } from '../log.js';
import {
  StoreError,
  type CreateInput,
  type Kind,
  type ListOptions,
  type ListResult,
  type OwnerReference,
  type Resource,
  type ResourceStore,
  type SpecOf,
  type StatusOf,
  type Watch,
  type WatchHandlers,
  type WriteOptions,
} from './types.js';

/** A Berth custom resource as the API server returns it. */
interface CustomObject<K extends Kind = Kind> extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string };
  spec: SpecOf<K>;
  status?: StatusOf<K>;
}

/** Conflicts on spec and finalizer writes are retried this often before giving up. */
const CONFLICT_RETRIES = 5;

function isApiError(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

function timestamp(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  return value instanceof Date ? value.toISOString() : new Date(String(value)).toISOString();
}

function toResource<K extends Kind>(kind: K, object: CustomObject): Resource<K> {
  const meta = object.metadata;
  const resource: Resource<K> = {
    kind,
    metadata: {
      name: meta.name,
      uid: meta.uid ?? '',
      resourceVersion: meta.resourceVersion ?? '',
      generation: meta.generation ?? 1,
      creationTimestamp: timestamp(meta.creationTimestamp) ?? new Date(0).toISOString(),
      labels: meta.labels ?? {},
      finalizers: meta.finalizers ?? [],
      ownerReferences: (meta.ownerReferences ?? []).map((owner) => ({
        kind: owner.kind as Kind,
        name: owner.name,
        uid: owner.uid,
        ...(owner.controller !== undefined ? { controller: owner.controller } : {}),
      })),
    },
    spec: object.spec as SpecOf<K>,
  };
  const deletion = timestamp(meta.deletionTimestamp);
  if (deletion) resource.metadata.deletionTimestamp = deletion;
  if (object.status !== undefined) resource.status = object.status as StatusOf<K>;
  return resource;
}

function ownerReference(owner: OwnerReference) {
  return {
    apiVersion: API_VERSION,
    kind: owner.kind,
    name: owner.name,
    uid: owner.uid,
    controller: owner.controller ?? false,
    blockOwnerDeletion: true,
  };
}

function matchesLabels(object: CustomObject, labels: Record<string, string> | undefined): boolean {
  if (!labels) return true;
  const own = object.metadata.labels ?? {};
  return Object.entries(labels).every(([key, value]) => own[key] === value);
}

/**
 * The resource store on a Kubernetes API server: Berth's kinds are custom resources in one
 * namespace. Reads come from an informer cache per kind (a miss falls through to the API
 * server, so a writer reads its own write); writes go to the API server with optimistic
 * concurrency. A failed watch is restarted with backoff and its watchers told to relist.
 */
export class KubernetesResourceStore implements ResourceStore {
  private readonly api: CustomObjectsApi;
  private readonly informers = new Map<Kind, ResilientInformer<CustomObject>>();
  private readonly watchers = new Map<Kind, Set<WatchHandlers>>();

  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly options: { namespace: string; log: Logger },
  ) {
    this.api = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  get namespace(): string {
    return this.options.namespace;
  }

  private coordinates(kind: Kind) {
    return { group: GROUP, version: VERSION, namespace: this.options.namespace, plural: KINDS[kind].plural };
  }

  /** The informer of a kind, started on first use; `synced` resolves when its first list is in the cache. */
  private cache(kind: Kind): ResilientInformer<CustomObject> {
    const existing = this.informers.get(kind);
    if (existing) return existing;
    const path = `/apis/${GROUP}/${VERSION}/namespaces/${this.options.namespace}/${KINDS[kind].plural}`;
    const watchers = () => this.watchers.get(kind) ?? [];
    const informer = startInformer<CustomObject>(
      this.kubeConfig,
      path,
      () => this.api.listNamespacedCustomObject(this.coordinates(kind)) as Promise<{ items: CustomObject[] }>,
      {
        onChange: (object, type) => {
          for (const handlers of watchers()) {
            handlers.onEvent({ type, name: object.metadata.name, resourceVersion: object.metadata.resourceVersion ?? '' });
          }
        },
        onRestart: () => {
          for (const handlers of watchers()) handlers.onResync();
        },
      },
      { log: this.options.log, what: kind },
    );
    this.informers.set(kind, informer);
    return informer;
  }

  /** Starts the informers of these kinds and waits for their caches (readiness). */
  async sync(kinds: Kind[]): Promise<void> {
    await Promise.all(kinds.map((kind) => this.cache(kind).synced));
  }

  async get<K extends Kind>(kind: K, name: string): Promise<Resource<K> | undefined> {
    const { cache, synced } = this.cache(kind);
    await synced;
    const cached = cache.get(name, this.options.namespace);
    if (cached) return toResource(kind, cached);
    return this.getLive(kind, name);
  }

  async getWithOwner<K extends Kind, O extends Kind>(kind: K, name: string, ownerKind: O): Promise<{ resource?: Resource<K>; owner?: Resource<O> }> {
    // Both come from the informers' caches: nothing to save by reading them together.
    const resource = await this.get(kind, name);
    const ownerName = resource?.metadata.ownerReferences?.find((reference) => reference.kind === ownerKind)?.name;
    const owner = ownerName === undefined ? undefined : await this.get(ownerKind, ownerName);
    return { ...(resource ? { resource } : {}), ...(owner ? { owner } : {}) };
  }

  private async getLive<K extends Kind>(kind: K, name: string): Promise<Resource<K> | undefined> {
    try {
      const object = (await this.api.getNamespacedCustomObject({ ...this.coordinates(kind), name })) as CustomObject;
      return toResource(kind, object);
    } catch (error) {
      if (isApiError(error, 404)) return undefined;
      throw error;
    }
  }

  async list<K extends Kind>(kind: K, options: ListOptions = {}): Promise<ListResult<K>> {
    const { cache, synced } = this.cache(kind);
    await synced;
    const descending = options.order === 'desc';
    const names = cache
      .list(this.options.namespace)
      .filter((object) => matchesLabels(object, options.labels))
      .filter((object) =>
        options.after === undefined ? true : descending ? object.metadata.name < options.after : object.metadata.name > options.after,
      )
      .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
    if (descending) names.reverse();
    const page = options.limit === undefined ? names : names.slice(0, options.limit);
    return { items: page.map((object) => toResource(kind, object)), hasMore: page.length < names.length };
  }

  async create<K extends Kind>(kind: K, input: CreateInput<K>): Promise<Resource<K>> {
    const body = {
      apiVersion: API_VERSION,
      kind,
      metadata: {
        name: input.name,
        namespace: this.options.namespace,
        labels: input.labels ?? {},
        finalizers: input.finalizers ?? [],
        ownerReferences: (input.ownerReferences ?? []).map(ownerReference),
      },
      spec: input.spec,
    };
    let created: CustomObject;
    try {
      created = (await this.api.createNamespacedCustomObject({ ...this.coordinates(kind), body })) as CustomObject;
    } catch (error) {
      if (isApiError(error, 409)) throw new StoreError('AlreadyExists', kind, input.name);
      throw error;
    }
    // Status is a subresource: the API server drops it on create, so it is written after,
    // unless the controller got there first, in which case its status stands.
    if (input.status === undefined) return toResource(kind, created);
    try {
      return await this.updateStatus(kind, input.name, input.status, { resourceVersion: created.metadata.resourceVersion ?? '' });
    } catch (error) {
      if (!(error instanceof StoreError && error.reason === 'Conflict')) throw error;
      return toResource(kind, await this.getObject(kind, input.name));
    }
  }

  async updateSpec<K extends Kind>(
    kind: K,
    name: string,
    mutate: (current: Resource<K>) => SpecOf<K> | undefined,
  ): Promise<Resource<K>> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.getObject(kind, name);
      const spec = mutate(toResource(kind, current));
      if (spec === undefined) return toResource(kind, current);
      try {
        const replaced = (await this.api.replaceNamespacedCustomObject({
          ...this.coordinates(kind),
          name,
          body: { ...current, spec },
        })) as CustomObject;
        return toResource(kind, replaced);
      } catch (error) {
        if (!isApiError(error, 409) || attempt >= CONFLICT_RETRIES) throw this.translate(error, kind, name);
      }
    }
  }

  async updateStatus<K extends Kind>(
    kind: K,
    name: string,
    status: StatusOf<K>,
    options: WriteOptions = {},
  ): Promise<Resource<K>> {
    // No database transaction spans a write to the API server: the rows and objects go first, on their own.
    if (options.within) throw new Error('the Kubernetes store cannot write within a database transaction');
    await options.alongside?.(undefined);
    if (options.events) await recordEvents(options.events.db, options.events.events, options.events.at);
    for (const { kind: createdKind, input } of options.creates ?? []) {
      try {
        await this.create(createdKind, input as CreateInput<typeof createdKind>);
      } catch (error) {
        if (!(error instanceof StoreError && error.reason === 'AlreadyExists')) throw error;
      }
    }
    const current = options.resourceVersion === undefined ? await this.getObject(kind, name) : undefined;
    const resourceVersion = options.resourceVersion ?? current!.metadata.resourceVersion;
    try {
      const replaced = (await this.api.replaceNamespacedCustomObjectStatus({
        ...this.coordinates(kind),
        name,
        body: { apiVersion: API_VERSION, kind, metadata: { name, namespace: this.options.namespace, resourceVersion }, status },
      })) as CustomObject;
      return toResource(kind, replaced);
    } catch (error) {
      throw this.translate(error, kind, name);
    }
  }

  async delete(kind: Kind, name: string): Promise<void> {
    try {
      // Background propagation: the garbage collector removes what this object owns.
      await this.api.deleteNamespacedCustomObject({ ...this.coordinates(kind), name, propagationPolicy: 'Background' });
    } catch (error) {
      throw this.translate(error, kind, name);
    }
  }

  async removeFinalizer(kind: Kind, name: string, finalizer: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      let current: CustomObject;
      try {
        current = await this.getObject(kind, name);
      } catch (error) {
        if (error instanceof StoreError && error.reason === 'NotFound') return;
        throw error;
      }
      const finalizers = current.metadata.finalizers ?? [];
      if (!finalizers.includes(finalizer)) return;
      try {
        // A merge patch replaces the whole list; the resourceVersion makes it conditional.
        await this.api.patchNamespacedCustomObject(
          {
            ...this.coordinates(kind),
            name,
            body: {
              metadata: {
                resourceVersion: current.metadata.resourceVersion,
                finalizers: finalizers.filter((entry) => entry !== finalizer),
              },
            },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        return;
      } catch (error) {
        if (isApiError(error, 404)) return;
        if (!isApiError(error, 409) || attempt >= CONFLICT_RETRIES) throw this.translate(error, kind, name);
      }
    }
  }

  watch(kind: Kind, handlers: WatchHandlers): Watch {
    let set = this.watchers.get(kind);
    if (!set) this.watchers.set(kind, (set = new Set()));
    set.add(handlers);
    return {
      ready: this.cache(kind).synced,
      stop: () => {
        set.delete(handlers);
      },
    };
  }

  async close(): Promise<void> {
    this.watchers.clear();
    await Promise.all([...this.informers.values()].map((informer) => informer.stop()));
    this.informers.clear();
  }

  private async getObject<K extends Kind>(kind: K, name: string): Promise<CustomObject<K>> {
    try {
      return (await this.api.getNamespacedCustomObject({ ...this.coordinates(kind), name })) as CustomObject<K>;
    } catch (error) {
      throw this.translate(error, kind, name);
    }
  }

  private translate(error: unknown, kind: Kind, name: string): unknown {
    if (isApiError(error, 404)) return new StoreError('NotFound', kind, name);
    if (isApiError(error, 409)) return new StoreError('Conflict', kind, name);
    return error;
  }
}

/** Cluster credentials: `KUBECONFIG` (or ~/.kube/config) when set, the pod's service account inside a cluster. */
export function loadKubeConfig(): KubeConfig {
  const config = new KubeConfig();
  config.loadFromDefault();
  return config;
}

export { startInformer, type ResilientInformer } from '../informer.js';
