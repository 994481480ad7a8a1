import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '@berth/common';

/** Resolves on the first SIGTERM or SIGINT; a second one exits at once. */
export function untilSignalled(log: Logger): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.warn({ signal }, 'second signal: exiting at once');
        process.exit(1);
      }
      stopping = true;
      log.info({ signal }, 'stopping');
      resolve(signal);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}

export async function listen(server: Server, port: number, host: string): Promise<number> {
  server.listen(port, host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  return (server.address() as AddressInfo).port;
}

/** No new connections; requests in flight get `graceMs` to finish, then their connections are cut. */
export function drain(server: Server, graceMs = 10_000): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
    setTimeout(() => server.closeAllConnections(), graceMs).unref();
  });
}
