import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpRelay {
  server: Server;
  /** Listens on `port` (0: any) of `host`. */
  listen(port: number, host: string): Promise<void>;
  /** Stops listening and cuts the open connections. */
  close(): Promise<void>;
}

/** A TCP relay to `target`: bytes pass through unchanged both ways; an error on either side ends both. */
export function createTcpRelay(target: { host: string; port: number }): TcpRelay {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  return {
    server,
    listen: (port, host) =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}

export interface TcpProxy {
  /** `http://127.0.0.1:<port>`: the target's URL through the proxy. */
  url: string;
  /** Refuses connections and cuts the open ones, as a host that went away. */
  down(): Promise<void>;
  /** Accepts connections again, on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

/** A real TCP proxy in front of an HTTP server on this host, to take it off the network and back. */
export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const { hostname, port } = new URL(target);
  const relay = createTcpRelay({ host: hostname, port: Number(port) });
  await relay.listen(0, '127.0.0.1');
  const ownPort = (relay.server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${ownPort}`,
    down: relay.close,
    up: () => relay.listen(ownPort, '127.0.0.1'),
    close: async () => {
      if (relay.server.listening) await relay.close();
    },
  };
}
