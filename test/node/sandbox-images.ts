import { createLogger } from '../../common/src/log.js';
import { ImageStore, type ImageName } from '../../providers/src/local/images.js';
import type { NodeImage } from './node.js';

/** The tag the chart and the operator name by default (`sandbox.images.*`, BERTH_IMAGE_*). */
export const SANDBOX_IMAGE_VERSION = '0.1.0';

export function sandboxImageReference(name: ImageName): string {
  return `berth/sandbox-${name}:${SANDBOX_IMAGE_VERSION}`;
}

/**
 * The sandbox images for the real node, from the local provider's root filesystems (built first
 * when missing, as `make images` builds them), under the references the operator uses by default.
 */
export async function sandboxNodeImages(names: ImageName[]): Promise<NodeImage[]> {
  const store = new ImageStore(process.env.BERTH_IMAGE_DIR ?? '/var/cache/berth/images', createLogger({ level: 'warn', name: 'node-images' }));
  return Promise.all(names.map(async (name) => ({ reference: sandboxImageReference(name), rootfs: await store.ensure(name) })));
}

/**
 * A bare gVisor pod of the python sandbox image running `command`, Ready once `readyPort` accepts
 * connections: the kubectl manifest (JSON) of a server a node test puts beside Berth's pods.
 */
export function serverPodManifest(pod: { name: string; labels: Record<string, string>; command: string[]; readyPort: number; env?: { name: string; value: string }[] }): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: pod.name, labels: pod.labels },
    spec: {
      runtimeClassName: 'gvisor',
      containers: [
        {
          name: 'main',
          image: sandboxImageReference('python'),
          imagePullPolicy: 'Never',
          command: pod.command,
          ...(pod.env ? { env: pod.env } : {}),
          readinessProbe: { tcpSocket: { port: pod.readyPort }, periodSeconds: 1 },
        },
      ],
    },
  });
}
