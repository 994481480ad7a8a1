import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProviderError, SandboxNotReadyError, type Logger } from '@berth/common';
import { runProcess } from './process.js';

export const BUILD_SCRIPT = fileURLToPath(new URL('../../../sandbox-images/local/build-rootfs.sh', import.meta.url));

/** The images of sandbox-images/, which the Dockerfiles build for clusters too. */
export const IMAGE_NAMES = ['python', 'node', 'go', 'browser'] as const;
export type ImageName = (typeof IMAGE_NAMES)[number];

export function isImageName(name: string): name is ImageName {
  return (IMAGE_NAMES as readonly string[]).includes(name);
}

/**
 * Root filesystems of the local sandbox images, built on first use. The directory name
 * carries a hash of every file the build of that image reads (the build script lists them),
 * so a changed package list, version or script builds a new image beside the old one, and
 * sandboxes still running on the old one keep their root.
 */
export class ImageStore {
  private readonly building = new Map<ImageName, Promise<string>>();
  private readonly failures = new Map<ImageName, Error>();
  private readonly hashes = new Map<ImageName, Promise<string>>();

  constructor(
    private readonly imageDir: string,
    private readonly log: Logger,
    /** The build script; its directory's parent holds the files it reads. */
    private readonly buildScript: string = BUILD_SCRIPT,
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
    let hash = this.hashes.get(name);
    if (!hash) {
      hash = this.inputsHash(name);
      this.hashes.set(name, hash);
      hash.catch(() => this.hashes.delete(name)); // a failed read is tried again next time
    }
    return join(this.imageDir, `${name}-${await hash}`);
  }

  async isBuilt(name: ImageName): Promise<boolean> {
    return existsSync(join(await this.path(name), 'rootfs', 'usr', 'bin'));
  }

  /** Hashes the files `build-rootfs.sh --inputs <name>` lists, names included, in its order. */
  private async inputsHash(name: ImageName): Promise<string> {
    const listed = await runProcess('bash', [this.buildScript, '--inputs', name], { timeoutMs: 10_000 });
    if (listed.exitCode !== 0) {
      throw new Error(`listing the inputs of sandbox image ${name} failed: ${listed.stderr.trim()}`);
    }
    const root = dirname(dirname(this.buildScript));
    const hash = createHash('sha256');
    for (const file of listed.stdout.split('\n').filter(Boolean)) {
      hash.update(`${file}\0`).update(await readFile(join(root, file))).update('\0');
    }
    return hash.digest('hex').slice(0, 12);
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
    const result = await runProcess('bash', [this.buildScript, name, scratch], {
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
