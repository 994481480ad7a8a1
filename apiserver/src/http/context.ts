import type { Logger } from '@berth/common';
import type { Mode } from '@berth/crds';

/** Who is calling: an API key of one organization, live or test. */
export interface Principal {
  organizationId: string;
  mode: Mode;
  keyId: string;
}

declare module 'express-serve-static-core' {
  interface Request {
    requestId: string;
    log: Logger;
    principal?: Principal;
  }
}
