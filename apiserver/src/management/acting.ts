import type { AuditActor, Principal } from '@berth/common';
import type { Mode } from '@berth/crds';
import type { Caller } from '../http/context.js';

/**
 * The principal a signed-in person acts as when a management route calls a data-plane
 * service: their organization, the mode (live or test data) the route was asked for, and
 * their user id where a key's id would name who acted.
 */
export function principalOf(caller: Caller, mode: Mode): Principal {
  return { organizationId: caller.organizationId!, mode, keyId: caller.user.id };
}

/** The signed-in person, as the audit log names them. */
export function actorOf(caller: Caller): AuditActor {
  return { type: 'user', id: caller.user.id };
}
