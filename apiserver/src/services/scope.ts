import { ApiError, idToObjectName, isId, type IdPrefix, type Kind, type Resource, type ResourceStore } from '@berth/common';
import type { Principal } from '../http/context.js';

/**
 * The resource with this API id, if it belongs to the caller's organization and key mode;
 * anything else (no such id, a malformed one, another tenant's, the other mode's) is 404.
 */
export async function findOwned<K extends Kind>(
  store: ResourceStore,
  kind: K,
  prefix: IdPrefix,
  principal: Principal,
  id: string,
): Promise<Resource<K>> {
  return owned(kind, principal, id, isId(id, prefix) ? await store.get(kind, idToObjectName(id)) : undefined);
}

/** `findOwned`, and in the same read of the store the resource's owner of `ownerKind` (undefined when it has none). */
export async function findOwnedWithOwner<K extends Kind, O extends Kind>(
  store: ResourceStore,
  kind: K,
  prefix: IdPrefix,
  principal: Principal,
  id: string,
  ownerKind: O,
): Promise<{ resource: Resource<K>; owner: Resource<O> | undefined }> {
  const found = isId(id, prefix) ? await store.getWithOwner(kind, idToObjectName(id), ownerKind) : {};
  return { resource: owned(kind, principal, id, found.resource), owner: found.owner };
}

function owned<K extends Kind>(kind: K, principal: Principal, id: string, resource: Resource<K> | undefined): Resource<K> {
  const spec = resource?.spec as { organizationId?: string; mode?: string } | undefined;
  if (!resource || spec?.organizationId !== principal.organizationId || spec.mode !== principal.mode) {
    throw new ApiError('not_found', `${kind.toLowerCase()} ${id} does not exist`, { id });
  }
  return resource;
}
