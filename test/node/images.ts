/**
 * The test node's container images, made without a registry or a container engine: each is an
 * OCI image layout written here from a root filesystem (one layer, the tar of that directory),
 * streamed as a tar archive into `ctr images import`.
 *
 * - `berth.local/pause`: the static program test/node/build.sh builds, alone in its image; the
 *   containerd config names it as the pods' sandbox (pause) image.
 * - `berth/sandbox-<image>:<version>`: the local provider's root filesystems (the same package
 *   lists, toolchains and user as the Dockerfiles, sandbox-images/README.md), with the image
 *   config the Dockerfiles give: user 1000:1000, HOME, /workspace, tini running `sleep infinity`.
 *
 * Layouts are kept in the node cache beside the rootfs hash they were made from, so a changed
 * image builds a new layout and an unchanged one is only imported.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';

export interface ImageSpec {
  /** The reference pods name, e.g. `docker.io/berth/sandbox-python:0.1.0`. */
  reference: string;
  /** Directory whose contents become the image's only layer. */
  rootfs: string;
  /** Changes whenever the rootfs does: names the cached layout. */
  key: string;
  config: { User?: string; Env: string[]; Entrypoint?: string[]; Cmd: string[]; WorkingDir?: string };
}

const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The image config of sandbox-images/base/Dockerfile, which every sandbox image inherits. */
export function sandboxImage(reference: string, rootfs: string): ImageSpec {
  return {
    reference,
    rootfs,
    // The local image store names each rootfs directory after the hash of its build inputs.
    key: basename(dirname(rootfs)),
    config: {
      User: '1000:1000',
      Env: [PATH_ENV, 'HOME=/home/sandbox'],
      Entrypoint: ['/usr/bin/tini', '--'],
      Cmd: ['sleep', 'infinity'],
      WorkingDir: '/workspace',
    },
  };
}

/** A pause image holding one static binary at /pause. */
export async function pauseImage(reference: string, binary: string, cache: string): Promise<ImageSpec> {
  const digest = createHash('sha256').update(await readFile(binary)).digest('hex').slice(0, 12);
  const rootfs = join(cache, `pause-rootfs-${digest}`);
  if (!existsSync(join(rootfs, 'pause'))) {
    await mkdir(rootfs, { recursive: true });
    await copyFile(binary, join(rootfs, 'pause.tmp'));
    await rename(join(rootfs, 'pause.tmp'), join(rootfs, 'pause'));
  }
  return { reference, rootfs, key: `pause-${digest}`, config: { Env: [PATH_ENV], Cmd: ['/pause'] } };
}

/** Writes (once) the OCI layout of `image` under `cache` and returns its directory. */
export async function ociLayout(image: ImageSpec, cache: string): Promise<string> {
  const layout = join(cache, `layout-${image.key}`);
  if (existsSync(join(layout, 'index.json'))) return layout;
  await mkdir(cache, { recursive: true });
  const scratch = await mkdtemp(`${layout}.tmp-`);
  try {
    const blobs = join(scratch, 'blobs', 'sha256');
    await mkdir(blobs, { recursive: true });
    const layerFile = join(scratch, 'layer.tar');
    await run('tar', ['--numeric-owner', '--xattrs', '-C', image.rootfs, '-cf', layerFile, '.']);
    const layerDigest = await sha256File(layerFile);
    const layerSize = (await stat(layerFile)).size;
    await rename(layerFile, join(blobs, layerDigest));
    const config = {
      architecture: 'amd64',
      os: 'linux',
      config: image.config,
      rootfs: { type: 'layers', diff_ids: [`sha256:${layerDigest}`] },
    };
    const configBlob = await writeBlob(blobs, JSON.stringify(config));
    const manifest = {
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...configBlob },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: `sha256:${layerDigest}`, size: layerSize }],
    };
    const manifestBlob = await writeBlob(blobs, JSON.stringify(manifest));
    const index = {
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          ...manifestBlob,
          platform: { architecture: 'amd64', os: 'linux' },
          // containerd names the imported image after this annotation.
          annotations: { 'io.containerd.image.name': image.reference, 'org.opencontainers.image.ref.name': image.reference.split(':').pop() },
        },
      ],
    };
    await writeFile(join(scratch, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    await writeFile(join(scratch, 'index.json'), JSON.stringify(index));
    await rename(scratch, layout).catch(async (error: NodeJS.ErrnoException) => {
      // Another run wrote it first.
      if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
      await rm(scratch, { recursive: true, force: true });
    });
    return layout;
  } catch (error) {
    await rm(scratch, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Imports the layout into containerd's `k8s.io` namespace (the CRI plugin's) unless an image of
 * that reference with that content is there already. Unpacked for the CRI's snapshotter, and
 * labelled pinned so that the kubelet's image garbage collection never removes an image no
 * registry could give back.
 */
export async function importImage(ctr: string[], image: ImageSpec, layout: string): Promise<void> {
  const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8')) as { manifests: { digest: string }[] };
  const wanted = index.manifests[0]!.digest;
  const listed = await run(ctr[0]!, [...ctr.slice(1), '-n', 'k8s.io', 'images', 'ls']);
  const present = listed.split('\n').some((line) => {
    const [name, , digest] = line.trim().split(/\s+/);
    return name === image.reference && digest === wanted;
  });
  if (!present) {
    const archive = join(layout, '..', `${basename(layout)}.import.tar`);
    await run('tar', ['-C', layout, '-cf', archive, 'oci-layout', 'index.json', 'blobs']);
    try {
      await run(ctr[0]!, [...ctr.slice(1), '-n', 'k8s.io', 'images', 'import', '--snapshotter', 'overlayfs', archive]);
    } finally {
      await rm(archive, { force: true });
    }
  }
  await run(ctr[0]!, [...ctr.slice(1), '-n', 'k8s.io', 'images', 'label', image.reference, 'io.cri-containerd.pinned=pinned']);
}

async function writeBlob(blobs: string, content: string): Promise<{ digest: string; size: number }> {
  const digest = createHash('sha256').update(content).digest('hex');
  await writeFile(join(blobs, digest), content);
  return { digest: `sha256:${digest}`, size: Buffer.byteLength(content) };
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return hash.digest('hex');
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${command} ${args.join(' ')} failed (${code}): ${stderr.slice(-2000)}`))));
  });
}

