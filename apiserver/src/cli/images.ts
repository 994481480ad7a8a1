import type { BerthConfig, Logger } from '@berth/common';
import { ImageStore, type ImageName } from '@berth/providers';
import { CliError } from './keys.js';

const IMAGES: ImageName[] = ['python', 'node', 'go', 'browser'];
/** What `build` without names builds: browser is left to first use, Chromium makes it large. */
const DEFAULT_BUILD: ImageName[] = ['python', 'node', 'go'];

/** `berth images build [python|node|go|browser]`, `berth images list`: the local provider's root filesystems. */
export async function imagesCommand(
  config: BerthConfig,
  log: Logger,
  args: { action: string | undefined; names: string[] },
  out: (line: string) => void,
): Promise<void> {
  const store = new ImageStore(config.imageDir, log);
  switch (args.action) {
    case 'build': {
      const names = args.names.length ? args.names : DEFAULT_BUILD;
      for (const name of names) {
        if (!IMAGES.includes(name as ImageName)) throw new CliError(`unknown image ${name}; images: ${IMAGES.join(', ')}`);
        const rootfs = await store.ensure(name as ImageName);
        out(`${name}: ${rootfs}`);
      }
      return;
    }
    case 'list': {
      for (const name of IMAGES) out(`${name.padEnd(7)} ${(await store.isBuilt(name)) ? 'built' : 'missing'}  ${await store.path(name)}`);
      return;
    }
    default:
      throw new CliError('usage: berth images build [python] [node] [go] [browser] | list');
  }
}
