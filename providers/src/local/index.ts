import { join } from 'node:path';
import type { BerthConfig, Logger } from '@berth/common';
import { ImageStore } from './images.js';
import { LocalProvider } from './provider.js';
import { Runsc } from './runsc.js';

export { ImageStore, type ImageName } from './images.js';
export { LocalProvider } from './provider.js';
export { Runsc, RunscError } from './runsc.js';
export { sandboxSpec } from './bundle.js';

/** The local provider as embedded mode configures it: state and sandboxes under the data directory. */
export function createLocalProvider(config: BerthConfig, log: Logger): LocalProvider {
  return new LocalProvider({
    runsc: new Runsc({ binary: config.runsc, stateDir: join(config.dataDir, 'runsc'), network: config.sandboxNetwork, overlayBytes: config.sandboxOverlaySize }),
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
