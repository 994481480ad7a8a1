import { createServer } from 'node:http';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createMetricsRegistry, type BerthConfig, type Logger } from '@berth/common';
import { API_VERSION } from '../app.js';
import { createNodeAgent } from '../node-agent/agent.js';
import { CliError } from './keys.js';
import { drain, listen, untilSignalled } from './lifecycle.js';

/** The runsc wrapper shipped beside the build (apiserver/node-agent/), from dist/cli or src/cli. */
const WRAPPER = join(import.meta.dirname, '..', '..', 'node-agent', 'runsc-restore.sh');

/**
 * `berth node`: the node agent on one node (ADR 38). Listens on BERTH_HOST (the chart runs it on
 * the host network and sets the node's IP) and BERTH_NODE_AGENT_PORT; every /v1 request must carry
 * BERTH_NODE_AGENT_TOKEN. Stops on SIGTERM after requests in flight.
 */
export async function nodeCommand(config: BerthConfig, log: Logger, out: (line: string) => void): Promise<void> {
  if (config.nodeAgentPort === undefined) throw new CliError('berth node needs BERTH_NODE_AGENT_PORT');
  if (config.nodeAgentToken === undefined) throw new CliError('berth node needs BERTH_NODE_AGENT_TOKEN (at least 32 characters)');
  const metrics = createMetricsRegistry({ version: API_VERSION });
  const nodeName = config.nodeName ?? hostname();
  const agent = await createNodeAgent({
    runsc: config.runsc,
    runscRoot: config.nodeRunscRoot,
    stateDir: config.nodeStateDir,
    nodeName,
    token: config.nodeAgentToken,
    wrapperSource: WRAPPER,
    log: log.child({ component: 'node-agent', node: nodeName }),
    metrics,
  });
  const server = createServer(agent.app);
  const port = await listen(server, config.nodeAgentPort, config.host);
  out(`berth node agent on ${config.host}:${port} (node ${nodeName}, runsc ${agent.runscVersion}); runsc wrapper at ${join(config.nodeStateDir, 'bin', 'runsc')}`);
  await untilSignalled(log);
  agent.stop();
  await drain(server);
}
