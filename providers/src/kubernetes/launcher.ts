/**
 * The launcher in a sandbox pod (ADR 47): the pod's main process is the same launcher as a local
 * sandbox's (sandbox-images/guest/launcher.py), so exec'd programs and background processes are
 * its children, inside the pod's gVisor sandbox and so inside a native checkpoint (ADR 38), where
 * a program started as a child of a Kubernetes exec is killed on restore.
 *
 * The launcher connects out to a channel; in a pod its other end is `pod-channel.py`, started
 * beside it, which shares the one channel among many clients. Each call of the provider opens a
 * Kubernetes exec of `pod-channel-client.pl` (a byte relay to pod-channel.py) and speaks the
 * launcher's frames over the exec's stdin and stdout, with the local provider's `Connection`.
 * The guest programs reach the pod as an immutable ConfigMap named by a hash of their contents,
 * mounted read-only where a local sandbox mounts the guest folder.
 */
import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import { Duplex, PassThrough, Writable } from 'node:stream';
import { Exec, type KubeConfig, type V1ConfigMap, type V1Status } from '@kubernetes/client-node';
import type { Logger } from '@berth/common';
import { guestSource } from '../guest.js';
import { Connection } from '../local/channel.js';
import { GUEST_MOUNT, LAUNCHER_NAME } from '../local/launcher.js';
import { exitCodeOf } from './exec.js';

/** The guest programs a sandbox pod runs, by file name (the ConfigMap's keys). */
export const POD_GUEST_FILES = ['launcher.py', 'pod-channel.py', 'pod-program.sh'] as const;

/** Where the launcher and pod-channel.py meet (launcher.py's CHANNEL default): an emptyDir of the pod. */
export const POD_CHANNEL_DIR = '/run/berth/channel';

/** The relay client's exit status when nothing listens in the pod: a pod started without the launcher. */
const NO_CHANNEL_EXIT = 7;

/** The ConfigMap with the guest programs, named by a hash of them: a pod keeps the programs it started with. */
export function guestConfigMap(namespace: string): V1ConfigMap {
  const data = Object.fromEntries(POD_GUEST_FILES.map((file) => [file, guestSource(file)]));
  const hash = createHash('sha256');
  for (const file of POD_GUEST_FILES) hash.update(`${file}\0${data[file]}\0`);
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: `berth-guest-${hash.digest('hex').slice(0, 12)}`,
      namespace,
      labels: { 'app.kubernetes.io/name': 'berth-guest', 'app.kubernetes.io/managed-by': 'berth' },
    },
    immutable: true,
    data,
  };
}

/**
 * The container's command: pod-channel.py in the background, then the launcher in the shell's
 * place as PID 1 (so pod-channel.py is its child, inside the sandbox), each under a name of its
 * own rather than python's (an agent's `pkill -f python` passes them by).
 */
export function launcherCommand(): string[] {
  return [
    '/bin/bash',
    '-c',
    `(exec -a berth-pod-channel python3 -I -S "$0/pod-channel.py") & exec -a ${LAUNCHER_NAME} python3 -I -S "$0/launcher.py"`,
    GUEST_MOUNT,
  ];
}

/** The exec's two ends as the socket a `Connection` reads and writes. */
class ExecSocket extends Duplex {
  constructor(
    private readonly input: PassThrough,
    private readonly onDestroy: () => void,
  ) {
    super();
  }
  override _read(): void {}
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.input.write(chunk, done);
  }
  override _destroy(error: Error | null, done: (error: Error | null) => void): void {
    this.onDestroy();
    done(error);
  }
  unref(): this {
    return this;
  }
}

type ExecTarget = { namespace: string; pod: string; container: string };

/** A connection to a pod's launcher, usable at once, and whether the pod has one. */
export interface PodLauncherLink {
  /** Frames written before the launcher's HELLO wait in the exec's stdin: a request costs no extra round trip. */
  connection: Connection;
  /** True once the launcher's HELLO came; false when the pod has no launcher channel (a pod an older Berth started). */
  ready: Promise<boolean>;
}

/**
 * Opens a connection to the pod's launcher over one Kubernetes exec. Closing the connection
 * closes the exec, and pod-channel.py then cancels what the connection still ran.
 */
export async function openPodLauncher(kubeConfig: KubeConfig, target: ExecTarget, log: Logger, waitMs = 15_000): Promise<PodLauncherLink> {
  const input = new PassThrough();
  let closeExec = () => undefined as void;
  const socket = new ExecSocket(input, () => closeExec());
  let settle!: (hello: boolean | Error) => void;
  const hello = new Promise<boolean | Error>((resolve) => (settle = resolve));
  const stderr: Buffer[] = [];
  const stdout = new Writable({
    write(chunk: Buffer, _encoding, done) {
      socket.push(chunk);
      done();
    },
  });
  const errors = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (stderr.length < 16) stderr.push(chunk);
      done();
    },
  });
  const connection = new Connection(
    socket as unknown as Socket,
    () => settle(true),
    () => settle(new Error(`the pod's launcher channel closed before it answered${stderr.length ? `: ${Buffer.concat(stderr).toString('utf8').trim()}` : ''}`)),
    log,
  );
  const onStatus = (status: V1Status) => {
    let code: number | undefined;
    try {
      code = exitCodeOf(status);
    } catch {
      code = undefined;
    }
    if (code === NO_CHANNEL_EXIT) settle(false);
    socket.destroy();
  };
  let websocket: Awaited<ReturnType<Exec['exec']>>;
  try {
    websocket = await new Exec(kubeConfig).exec(target.namespace, target.pod, target.container, ['perl', '-e', guestSource('pod-channel-client.pl')], stdout, errors, input, false, onStatus);
  } catch (error) {
    connection.close();
    throw error;
  }
  closeExec = () => websocket.close();
  websocket.on('close', () => socket.destroy());
  websocket.on('error', () => socket.destroy());
  const timer = setTimeout(() => settle(new Error(`the pod's launcher did not answer in ${waitMs} ms`)), waitMs);
  const ready = hello.then((outcome) => {
    clearTimeout(timer);
    if (outcome instanceof Error) throw outcome;
    if (!outcome) connection.close();
    return outcome;
  });
  ready.catch(() => undefined);
  return { connection, ready };
}
