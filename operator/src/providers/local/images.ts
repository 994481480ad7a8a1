import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProviderError, SandboxNotReadyError, type Logger } from '@berth/common';
import { runProcess } from './process.js';

export const BUILD_SCRIPT = fileURLToPath(new URL('../../../../sandbox-images/local/build-rootfs.sh', import.meta.url));

export type ImageName = 'base' | 'go';

/**
 * Root filesystems of the local sandbox images, built on first use. The directory name
 * carries a hash of the build script, so a changed script builds a new image beside the
 * old one and sandboxes still running on the old one keep their root.
 */
export class ImageStore {
  private readonly building = new Map<ImageName, Promise<string>>();
  private readonly failures = new Map<ImageName, Error>();
  private scriptHash: string | undefined;

  constructor(
    private readonly imageDir: string,
    private readonly log: Logger,
  ) {}

  /**
   * The image's rootfs path when it is built; otherwise starts the build (once) and throws
   * `SandboxNotReadyError`, so that a reconcile can report progress instead of blocking.
   */
  async ready(name: ImageName): Promise<string> {
    if (await this.isBuilt(name)) return join(await this.path(name), 'rootfs');
    const failure = this.failures.get(name);
    if (failure && !this.building.has(name)) {
      this.failures.delete(name); // the next call tries again
      throw new ProviderError('local', failure.message);
    }
    this.ensure(name).catch((error: unknown) => this.failures.set(name, error as Error));
    throw new SandboxNotReadyError('local', `building sandbox image ${name} (first use; about a minute)`, 3_000);
  }

  /** The image's rootfs path, building it first when it is missing. */
  ensure(name: ImageName): Promise<string> {
    let pending = this.building.get(name);
    if (!pending) {
      pending = this.ensureUncached(name).finally(() => this.building.delete(name));
      this.building.set(name, pending);
    }
    return pending;
  }

  async path(name: ImageName): Promise<string> {
    this.scriptHash ??= createHash('sha256')
      .update(await readFile(BUILD_SCRIPT))
      .digest('hex')
      .slice(0, 12);
    return join(this.imageDir, `${name}-${this.scriptHash}`);
  }

  async isBuilt(name: ImageName): Promise<boolean> {
    return existsSync(join(await this.path(name), 'rootfs', 'usr', 'bin'));
  }

  private async ensureUncached(name: ImageName): Promise<string> {
    const dir = await this.path(name);
    const rootfs = join(dir, 'rootfs');
    if (await this.isBuilt(name)) return rootfs;
    await mkdir(this.imageDir, { recursive: true });
    // Built aside and renamed into place: a concurrent builder or a crash never leaves a half image.
    const scratch = `${dir}.building-${process.pid}-${Date.now()}`;
    this.log.info({ image: name, dir }, 'building sandbox image (first use; this takes a minute)');
    const started = Date.now();
    const result = await runProcess('bash', [BUILD_SCRIPT, name, scratch], {
      timeoutMs: 15 * 60_000,
      onStderrLine: (line) => {
        const step = /^\[build-rootfs [a-z]+\] (.*)$/.exec(line);
        if (step) this.log.info({ image: name, step: step[1] }, 'building sandbox image');
      },
    });
    if (result.exitCode !== 0) {
      await rm(scratch, { recursive: true, force: true });
      throw new Error(`building sandbox image ${name} failed: ${result.stderr.trim().split('\n').slice(-5).join(' | ')}`);
    }
    try {
      await rename(scratch, dir);
    } catch (error) {
      await rm(scratch, { recursive: true, force: true });
      if (!(await this.isBuilt(name))) throw error;
    }
    this.log.info({ image: name, seconds: Math.round((Date.now() - started) / 1000) }, 'sandbox image built');
    return rootfs;
  }
}
