/**
 * A TCP relay from the node IP to a server that listens on loopback only (the test cluster's API
 * server, the tests' PostgreSQL). Pods on the real node reach the host at the node IP, never at
 * its loopback: this is how Berth's own pods, installed by the chart, reach the control plane
 * and the database of a test run. Bytes pass through unchanged (TLS ends at the server), and the
 * relay listens on the same port number as its target.
 */
import { connect, createServer, type Socket } from 'node:net';
import { NODE_IP } from './node.js';

export interface NodeRelay {
  /** `<node IP>:<port>`. */
  address: string;
  port: number;
  close(): Promise<void>;
}

export async function relayFromNodeIp(target: { host: string; port: number }): Promise<NodeRelay> {
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
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(target.port, NODE_IP, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    address: `${NODE_IP}:${target.port}`,
    port: target.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}
