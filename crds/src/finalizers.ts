/**
 * Finalizer names on Berth's resources. The API server sets them when it creates a resource,
 * the operator removes them when the thing outside the cluster is gone, so both read them here.
 */

/** Keeps an Agent until the operator has released its sandbox, whoever deletes the Agent. */
export const SANDBOX_FINALIZER = 'berth.dev/sandbox';
