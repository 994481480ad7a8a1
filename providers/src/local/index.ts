import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { ProviderError, type BerthConfig, type EgressMetrics, type Logger } from '@berth/common';
import { EgressProxy, type EgressProxyOptions } from './egress/proxy.js';
import { ImageStore } from './images.js';
import { SpareProcesses } from './process.js';
import { LocalProvider } from './provider.js';
import { Runsc } from './runsc.js';

export { ImageStore, type ImageName } from './images.js';
export { LocalProvider } from './provider.js';
export { EgressProxy, type EgressProxyOptions, type GatewaySandbox } from './egress/proxy.js';
export { createCertificateAuthority, issueServerCertificate, newServerKey } from './egress/certificates.js';
export { Runsc, RunscError } from './runsc.js';
export { sandboxSpec } from './bundle.js';

function readCaFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new ProviderError('local', `BERTH_EGRESS_CA_FILE: cannot read ${path}: ${(error as Error).message}`);
  }
}

/** The egress proxy's options as the configuration gives them, for the local provider's proxy and the operator's gateway. */
export function egressProxyOptions(config: BerthConfig, log: Logger, metrics?: EgressMetrics): EgressProxyOptions {
  // The install's own CAs (BERTH_EGRESS_CA_FILE) are trusted beside the system's, for hosts the proxy connects to itself.
  const trustedCas = config.egressCaFile === undefined ? undefined : [...rootCertificates, readCaFile(config.egressCaFile)];
  return {
    log: log.child({ component: 'egress' }),
    ...(metrics ? { metrics } : {}),
    ...(trustedCas ? { trustedCas } : {}),
    ...(config.egressDnsServers.length > 0 ? { dnsServers: config.egressDnsServers } : {}),
  };
}

/** The local provider as embedded mode configures it: state and sandboxes under the data directory. */
export function createLocalProvider(config: BerthConfig, log: Logger, options: { egressMetrics?: EgressMetrics } = {}): LocalProvider {
  const egress = new EgressProxy(egressProxyOptions(config, log, options.egressMetrics));
  // One for each program a pause starts: its checkpoint, the workspace's sync, the container's delete.
  const spareProcesses = new SpareProcesses(3);
  return new LocalProvider({
    egress,
    runsc: new Runsc({ binary: config.runsc, stateDir: join(config.dataDir, 'runsc'), network: config.sandboxNetwork, overlayBytes: config.sandboxOverlaySize, spares: spareProcesses }),
    spareProcesses,
    images: new ImageStore(config.imageDir, log),
    sandboxDir: join(config.dataDir, 'sandboxes'),
    cpus: config.sandboxCpus,
    memoryBytes: config.sandboxMemory,
    workspaceBytes: config.workspaceSize,
    overlayBytes: config.sandboxOverlaySize,
    ...(config.browserImage !== undefined ? { browserImage: config.browserImage } : {}),
    log: log.child({ provider: 'local' }),
  });
}
