import type { Mode } from '@berth/crds';

/**
 * Who acts: an API key of one organization, live or test. Requests act as the key that sent
 * them; a job acts as the source that queued it (`keyId` names that source), so what it creates
 * is scoped exactly like what that key would create.
 */
export interface Principal {
  organizationId: string;
  mode: Mode;
  keyId: string;
}
