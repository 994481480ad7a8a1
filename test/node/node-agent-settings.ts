/**
 * What a test run's node agent (`berth node`) is started with on the real node: a free port on the
 * node IP, a fresh token, and the state directory whose `restores/` the node's runsc wrapper reads
 * (node.ts). The operator gets the same port and token.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { NODE_IP, NODE_NAME, RESTORES, RUNSC } from './node.js';

export interface NodeAgentSettings {
  port: number;
  token: string;
  /** The node agent's environment. */
  env: Record<string, string>;
}

export async function nodeAgentSettings(runscRoot: string): Promise<NodeAgentSettings> {
  const port = await freePort(NODE_IP);
  const token = randomBytes(24).toString('hex');
  return {
    port,
    token,
    env: {
      BERTH_HOST: NODE_IP,
      BERTH_NODE_AGENT_PORT: String(port),
      BERTH_NODE_AGENT_TOKEN: token,
      BERTH_NODE_NAME: NODE_NAME,
      BERTH_NODE_RUNSC_ROOT: runscRoot,
      BERTH_NODE_STATE_DIR: `${RESTORES}/..`,
      BERTH_RUNSC: RUNSC,
    },
  };
}

/** A port free on `host` a moment ago. */
export async function freePort(host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
