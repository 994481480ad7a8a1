/**
 * A TCP relay from the node IP to a server that listens on loopback only (the test cluster's API
 * server, the tests' PostgreSQL). Pods on the real node reach the host at the node IP, never at
 * its loopback: this is how Berth's own pods, installed by the chart, reach the control plane
 * and the database of a test run. Bytes pass through unchanged (TLS ends at the server), and the
 * relay listens on the same port number as its target.
 */
import { createTcpRelay } from '../helpers/tcp-proxy.js';
import { NODE_IP } from './node.js';

export interface NodeRelay {
  /** `<node IP>:<port>`. */
  address: string;
  port: number;
  close(): Promise<void>;
}

export async function relayFromNodeIp(target: { host: string; port: number }): Promise<NodeRelay> {
  const relay = createTcpRelay(target);
  await relay.listen(target.port, NODE_IP);
  return { address: `${NODE_IP}:${target.port}`, port: target.port, close: relay.close };
}
