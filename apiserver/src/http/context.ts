import type { Logger, Principal } from '@berth/common';

export type { Principal } from '@berth/common';

declare module 'express-serve-static-core' {
  interface Request {
    requestId: string;
    log: Logger;
    principal?: Principal;
  }
}
