import { createHash, randomUUID } from 'node:crypto';
import { chmodSync, existsSync, readdirSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { chmod, mkdir, readFile, readlink, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Duplex } from 'node:stream';
import type { Compute, SandboxRef } from '@berth/crds';
import { z } from 'zod';
import {
  ArchiveIntegrityError,
  ArchiveNotFoundError,
  EXEC_OPTIONS,
  ExecTimeoutError,
  ProviderError,
  UnsupportedRequestError,
  unsupportedReason,
  storedArchiveOf,
  verifyArchive,
  type CheckpointResult,
  type ArchiveTarget,
  type CheckpointTarget,
  type LocalCheckpointTarget,
  type BackgroundFollow,
  type BackgroundFollowRequest,
  type BackgroundOutput,
  type BackgroundProcess,
  type BackgroundRequest,
  type ExecRequest,
  type ExecResult,
  type Logger,
  type ProcessSignal,
  type StreamExecRequest,
  type TerminalHandle,
  type TerminalRequest,
  type ProviderCapabilities,
  type ProvisionRequest,
  type RestoreSource,
  type SandboxEgress,
  type SandboxProvider,
  type SandboxState,
  type SnapshotLevel,
  type SnapshotStorage,
  type WarmSandboxRequest,
} from '@berth/common';
import { GUEST_DIR } from '../guest.js';
import { INTERPRETERS } from '../program.js';
import { launcherFiles, launcherTunnel } from './files.js';
import { extractArchive, packArchive, readMember } from './archive.js';
import { EXEC_MOUNT, hasChannel, hasEgress, restoreSpec, sandboxSpec } from './bundle.js';
import type { EgressProxy } from './egress/proxy.js';
import { EGRESS_SOCKET, prepareEgressFolder } from './egress/sandbox.js';
import {
  CHANNEL_SOCKET,
  LauncherChannels,
  backgroundOutput,
  controlFailure,
  backgroundProcessSchema,
  backgroundProcess,
  type ChannelExecResult,
  type Connection,
  PROTOCOL_WITH_ADR_39,
  PROTOCOL_WITH_ADR_40,
} from './channel.js';
import { isImageName, type ImageName, type ImageStore } from './images.js';
import { launcherLimit, parseOutcome, viaLauncher } from './launcher.js';
import {
  CHECKPOINT_DIR,
  localManifest,
  MANIFEST_FILE,
  parseManifest,
  WORKSPACE_DIR,
  whyNotNative,
  type SnapshotManifest,
} from './manifest.js';
import { MemoryGuard } from './memory.js';
import { SandboxAliases } from './aliases.js';
import { Runsc, RunscError } from './runsc.js';
import { ensureVolume, isMountPoint, SpareVolumes, unmountVolume, VOLUME_IMAGE } from './volume.js';
import { armFilesystemSync, copyImage, flushDirectory, flushFile, flushTree, syncFilesystem } from './flush.js';
import type { ArmedStep, SpareProcesses } from './process.js';

export interface LocalProviderOptions {
  runsc: Runsc;
  images: ImageStore;
  /** Sandboxes' bundles and workspaces live under `<sandboxDir>/<agent id>/`. */
  sandboxDir: string;
  cpus: number;
  memoryBytes: number;
  /** Size of each sandbox's /workspace filesystem (see volume.ts). */
  workspaceBytes: number;
  /** Largest the sandbox's in-memory root overlay (/tmp, /root, caches) may grow. */
  overlayBytes: number;
  /** The image of browser agents, normally `browser`; browser agents are refused while unset. */
  browserImage?: string;
  maxOutputBytes?: number;
  /** The guest programs' folder on this host (sandbox-images/guest by default). */
  guestDir?: string;
  /** Empty workspace filesystems kept ready for new sandboxes (default 4; 0 makes each when needed). */
  spareVolumes?: number;
  /**
   * Processes made ahead of need for the programs a pause runs (`runsc checkpoint`, the
   * workspace's `sync -f`, `runsc delete`), shared with `runsc`: made at `prepareImages`, made again
   * when a pause's archive begins, ended at `close`.
   */
  spareProcesses?: SpareProcesses;
  /** The egress proxy of this host's sandboxes (ADR 46); without it sandboxes have no way out at all. */
  egress?: EgressProxy;
  log: Logger;
}

/** The policy of a sandbox whose agent has none: nothing may be reached. */
const NO_EGRESS: SandboxEgress = { hosts: [], cidrs: [], credentials: [] };

/** Where the spare workspace filesystems wait, mounted, beside the sandboxes' directories (same filesystem: taking one is a rename). */
const SPARE_VOLUME_DIR = '.spare-volumes';

/** How long a sandbox that stopped answering gets to end before it is reported anyway. */
const DYING_WAIT_MS = 3_000;
/** How long the memory guard waits for the launcher's answer before it asks through runsc. */
const MEMORY_RELIEF_WAIT_MS = 1_000;
const largestAnswerSchema = z.object({
  program: z.object({ pid: z.number().int().positive(), command: z.string().max(64), residentBytes: z.number().int().nonnegative() }).nullable(),
});

/**
 * How long an exec waits for a sandbox's launcher to connect its channel (it connects within
 * a second of starting, of a restore, or of a Berth restart) before it goes through `runsc exec`.
 */
const LAUNCHER_CONNECT_MS = 3_000;
/** The longest path a unix socket may have on Linux (sun_path, less its terminating NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

/** The copy of the workspace's filesystem that a kept checkpoint holds once its sandbox was restored before the archive. */
const KEPT_WORKSPACE_IMAGE = 'workspace.ext4';

const IMAGE_FOR_COMPUTE: Record<Compute, ImageName> = { python: 'python', node: 'node', go: 'go' };

// Modules in /workspace import as they would from a script there.
/** How long the launcher has to answer a request about background processes. */
const CONTROL_WAIT_MS = 10_000;

const EXEC_ENV = { PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1', PYTHONPATH: '/workspace' };

/** Programs up to this many characters (at most 3 bytes each in UTF-8) are written without the thread pool (see writeProgram). */
const SYNC_PROGRAM_MAX_CHARS = 16 * 1024;

/** Sandboxes on this host in gVisor: one long-lived `runsc` container per agent. */
export class LocalProvider implements SandboxProvider {
  readonly name = 'local';
  readonly capabilities: ProviderCapabilities;
  readonly execOptions = EXEC_OPTIONS;
  /** The sandbox's files, through its launcher (ADR 40). */
  readonly files = launcherFiles(this.name, (ref) => this.filesConnectionOf(ref));
  private readonly browserImage: ImageName | undefined;
  private readonly sandboxListeners = new Set<(agentId: string) => void>();
  private readonly memory: MemoryGuard;
  /** Archives of kept checkpoints in progress, by agent: a restore of the agent cancels its own. */
  private readonly archiving = new Map<string, { key: string; cancel: AbortController; done: Promise<void> }>();
  /** Why an archive (`<agent id>/<key>`) was cancelled, so that its failure says so. */
  private readonly cancelled = new Map<string, string>();
  private readonly workspaceTurns = new Map<string, Promise<void>>();
  /** Containers of checkpointed sandboxes being deleted after the checkpoint answered, by agent. */
  private readonly releasing = new Map<string, Promise<void>>();
  private runtimeVersionOnce: Promise<string> | undefined;
  private readonly channels: LauncherChannels;
  /**
   * What the bundle says of each sandbox with a channel (read once): the environment of its spec,
   * which its execs get (after a restore it holds the secrets' current values, where the restored
   * launcher's own environment holds those it started with), as `runsc exec` gives it. Null: the
   * sandbox has no channel.
   */
  private readonly channelSpec = new Map<string, { env: Record<string, string> } | null>();
  /** Sandboxes whose launcher did not connect in time. */
  private readonly channelLate = new Set<string>();
  private readonly spares: SpareVolumes | undefined;
  /**
   * Agents whose sandbox came from a warm pool (ADR 45), by agent id: the warm sandbox's id, whose
   * directory holds the agent's files. Kept on disk as a symlink `<agent id>` → `<warm id>` in the
   * sandboxes' directory, read back at start.
   */
  private readonly aliases = new SandboxAliases();

  constructor(private readonly options: LocalProviderOptions) {
    for (const entry of (() => {
      try {
        return readdirSync(options.sandboxDir, { withFileTypes: true });
      } catch {
        return [];
      }
    })()) {
      if (entry.isSymbolicLink()) this.aliases.set(entry.name, basename(readlinkSync(join(options.sandboxDir, entry.name))));
    }
    if (options.browserImage !== undefined && !isImageName(options.browserImage)) {
      throw new ProviderError(
        this.name,
        `browser image "${options.browserImage}" is not a local sandbox image; set BERTH_BROWSER_IMAGE=browser`,
      );
    }
    this.browserImage = options.browserImage;
    this.channels = new LauncherChannels(options.log);
    this.memory = new MemoryGuard({
      runsc: options.runsc,
      log: options.log,
      inside: {
        largest: async (containerId) => {
          const connection = this.channels.connection(containerId);
          if (connection === undefined) return undefined;
          return largestAnswerSchema.parse(await connection.control({ op: 'largest' }, MEMORY_RELIEF_WAIT_MS)).program;
        },
        kill: async (containerId, pid) => {
          const connection = this.channels.connection(containerId);
          if (connection === undefined) return false;
          await connection.control({ op: 'kill', pid }, MEMORY_RELIEF_WAIT_MS);
          return true;
        },
      },
      onLost: (agentId) => {
        for (const listener of this.sandboxListeners) listener(agentId);
      },
    });
    const spareCount = options.spareVolumes ?? 4;
    this.spares =
      spareCount > 0
        ? new SpareVolumes({
            dir: join(options.sandboxDir, SPARE_VOLUME_DIR),
            sizeBytes: options.workspaceBytes,
            count: spareCount,
            onError: (error) => options.log.warn({ err: error }, 'could not make a spare workspace filesystem; new sandboxes make their own'),
          })
        : undefined;
    this.capabilities = {
      computes: ['python', 'node', 'go'],
      browser: this.browserImage !== undefined,
      gpuTypes: [],
      storage: false,
      checkpoint: 'native',
      sandboxSize: { cpus: options.cpus, memoryBytes: options.memoryBytes, diskBytes: options.workspaceBytes },
      egress: options.egress !== undefined,
      egressOnClaim: options.egress !== undefined,
      handOverInTransaction: true,
    };
  }

  /**
   * Stops the egress proxy's listeners (the sandboxes stay; a new process adopts them and listens
   * again) and unmounts the spare workspaces (their files stay for the next process).
   */
  async close(): Promise<void> {
    await this.options.egress?.closeAll();
    this.options.spareProcesses?.stop();
    await this.spares?.close();
  }

  /** The runsc version line; fails when runsc cannot be run. */
  runtimeVersion(): Promise<string> {
    return this.options.runsc.version();
  }

  /** Builds the default image ahead of the first agent, if it is missing, and makes the spare workspaces. */
  async prepareImages(): Promise<void> {
    this.spares?.fill();
    this.options.spareProcesses?.fill();
    await this.options.images.ensure(IMAGE_FOR_COMPUTE.python);
  }

  private paths(agentId: string) {
    const root = join(this.options.sandboxDir, this.aliases.sandboxOf(agentId) ?? agentId);
    return {
      root,
      bundle: join(root, 'bundle'),
      workspace: join(root, WORKSPACE_DIR),
      /** The filesystem mounted at `workspace`. */
      workspaceImage: join(root, VOLUME_IMAGE),
      exec: join(root, 'exec'),
      /** The host's end of the launcher's channel (channel.ts): a unix socket in a directory of its own. */
      channel: join(root, 'channel'),
      channelSocket: join(root, 'channel', CHANNEL_SOCKET),
      /** The sandbox's egress folder (egress/sandbox.ts), with the proxy's socket for it. */
      egress: join(root, 'egress'),
      egressSocket: join(root, 'egress', EGRESS_SOCKET),
      console: join(root, 'console.log'),
      /** Where a snapshot archive is extracted before its parts are moved into place. */
      restoring: join(root, 'restoring'),
      /** The workspace filesystem a restore fills, mounted at `restoring/workspace`. */
      restoringImage: join(root, 'workspace.restoring.ext4'),
    };
  }

  /**
   * Makes the sandbox's directory, readable by root only: it holds the bundle (the environment,
   * with the agent's secrets), the workspace and checkpoint images (process memory).
   */
  private async makeRoot(agentId: string): Promise<void> {
    await mkdir(this.options.sandboxDir, { recursive: true, mode: 0o700 });
    await chmod(this.options.sandboxDir, 0o700);
    await mkdir(this.paths(agentId).root, { recursive: true, mode: 0o700 });
    await chmod(this.paths(agentId).root, 0o700);
  }

  async provision(request: ProvisionRequest): Promise<SandboxRef> {
    const unsupported = unsupportedReason(this, request);
    if (unsupported) throw new UnsupportedRequestError(this.name, `${unsupported.field}: ${unsupported.message}`);
    const containerId = request.agentId;
    await this.released(containerId);
    // As in clusters, browser agents get the browser image whatever their compute: it runs python3,
    // Node.js and bash, but has no pip or Go. Without one, unsupportedReason refused them above.
    const image = request.browser && this.browserImage ? this.browserImage : IMAGE_FOR_COMPUTE[request.compute];
    const ref: SandboxRef = { provider: this.name, id: containerId, details: { image } };
    // Adopt the sandbox a previous process started (or restored: the restore is done then). A
    // sandbox without its directory was never started (its bundle is written there first) or was
    // deleted (the container goes before the directory): no need to ask runsc, a process's wait.
    const status = existsSync(this.paths(containerId).root) ? await this.options.runsc.state(containerId) : undefined;
    if (status === 'running') {
      await this.guardMemory(containerId);
      await this.listenForLauncher(containerId);
      await this.setEgress(ref, request.egress ?? NO_EGRESS);
      return ref;
    }
    if (status !== undefined) await this.options.runsc.delete(containerId);

    if (request.restore) await this.restore(request, request.restore, image);
    else await this.start(request, image, await this.options.images.ready(image));
    await this.setEgress(ref, request.egress ?? NO_EGRESS);
    // The sandbox is up: the spare workspace it may have taken is made again, after its start.
    this.spares?.fill();
    return ref;
  }

  /**
   * Starts a warm pool's sandbox (ADR 45): the image of its compute, an empty environment (no
   * agent's secrets: it has no agent yet) and an empty workspace, named by its own id.
   */
  async startWarm(request: WarmSandboxRequest): Promise<SandboxRef> {
    const unsupported = unsupportedReason(this, request);
    if (unsupported) throw new UnsupportedRequestError(this.name, `${unsupported.field}: ${unsupported.message}`);
    const image = request.browser && this.browserImage ? this.browserImage : IMAGE_FOR_COMPUTE[request.compute];
    const ref: SandboxRef = { provider: this.name, id: request.id, details: { image } };
    const status = existsSync(this.paths(request.id).root) ? await this.options.runsc.state(request.id) : undefined;
    if (status === 'running') {
      await this.guardMemory(request.id);
      await this.listenForLauncher(request.id);
      return ref;
    }
    if (status !== undefined) await this.options.runsc.delete(request.id);
    const rootfs = await this.options.images.ready(image);
    await this.start({ agentId: request.id, sessionId: '', timeoutSeconds: 1, compute: request.compute, browser: request.browser, env: {} }, image, rootfs);
    this.spares?.fill();
    return ref;
  }

  /**
   * Gives the warm sandbox to the agent: the agent's id names its directory from now on (a symlink,
   * so that its checkpoints, archives and end find it by the agent's id), and the agent's
   * environment (its secrets) goes into the bundle's process environment, which the launcher gives
   * every program it starts from now on; the sandbox never held it before. No process starts: the
   * claim is a link, a file write and a map entry.
   */
  async claimWarm(warm: SandboxRef, request: ProvisionRequest): Promise<SandboxRef> {
    const agentId = request.agentId;
    // A hand-over whose claim never committed (the process ended between the two, ADR 45) leaves
    // its link behind, read back at start. The sandbox may hold that agent's secrets: no other
    // agent gets it (the reconciler ends it), and that agent's next claim replaces it.
    const handedTo = this.aliases.holderOf(warm.id, agentId);
    if (handedTo !== undefined) {
      throw new ProviderError(this.name, `warm sandbox ${warm.id} was handed to agent ${handedTo} by a claim that did not commit`, { sandbox: warm.id });
    }
    const earlier = this.aliases.sandboxOf(agentId);
    if (earlier !== undefined && earlier !== warm.id) {
      this.options.log.warn({ agentId, earlier, warmSandbox: warm.id }, 'ending the warm sandbox of an earlier hand-over to this agent whose claim did not commit');
      await this.terminate({ provider: this.name, id: earlier, details: { agentId } });
    }
    if (!existsSync(this.paths(warm.id).root)) throw new ProviderError(this.name, `warm sandbox ${warm.id} is gone`, { sandbox: warm.id });
    if (this.aliases.sandboxOf(agentId) !== warm.id) {
      const link = join(this.options.sandboxDir, agentId);
      try {
        // One system call, made here rather than through the thread pool (a hop each way, slow on
        // a loaded host): the claim's transaction is open meanwhile, and the client waits for it.
        symlinkSync(warm.id, link);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || (await readlink(link).catch(() => undefined)) !== warm.id) {
          throw new ProviderError(this.name, `could not give warm sandbox ${warm.id} to agent ${agentId}: ${(error as Error).message}`, { sandbox: warm.id });
        }
      }
      this.aliases.set(agentId, warm.id);
    }
    const ref = { provider: this.name, id: warm.id, details: { ...warm.details, agentId } };
    // The pool's sandbox has no environment of an agent's: an agent without one needs no write.
    if (Object.keys(request.env).length === 0) return ref;
    const bundle = join(this.paths(warm.id).bundle, 'config.json');
    const spec = JSON.parse(await readFile(bundle, 'utf8')) as { process?: { env?: string[] } };
    const injected = new Set(Object.keys(request.env));
    const kept = (spec.process?.env ?? []).filter((entry) => !injected.has(entry.slice(0, entry.indexOf('='))));
    spec.process = { ...spec.process, env: [...kept, ...Object.entries(request.env).map(([name, value]) => `${name}=${value}`)] };
    // Only root reads it: it holds the agent's secrets now.
    await writeFile(bundle, JSON.stringify(spec, null, 2), { mode: 0o600 });
    this.channelSpec.set(warm.id, channelSpecOf(spec as Record<string, unknown>));
    return ref;
  }

  /**
   * Has a program that exhausts the sandbox's memory killed, rather than the sandbox (see
   * memory.ts), at the limit the sandbox was started with (a restored one keeps its own): that of
   * `spec` when the caller has the bundle's spec at hand (it just launched the sandbox), else the
   * one its bundle's file holds.
   */
  private async guardMemory(containerId: string, bundleSpec?: Record<string, unknown>): Promise<void> {
    const spec =
      bundleSpec ??
      (await readFile(join(this.paths(containerId).bundle, 'config.json'), 'utf8')
        .then((text) => JSON.parse(text) as Record<string, unknown>)
        .catch(() => undefined));
    const limit = (spec as { linux?: { resources?: { memory?: { limit?: number } } } } | undefined)?.linux?.resources?.memory?.limit;
    if (limit === undefined) this.options.log.warn({ agentId: containerId }, 'no memory limit in the sandbox\'s bundle: its memory is not guarded');
    else this.memory.watch(containerId, limit);
  }

  /** Starts a new sandbox on the image, with whatever its workspace directory holds. */
  private async start(request: ProvisionRequest, image: ImageName, rootfs: string): Promise<void> {
    const paths = this.paths(request.agentId);
    // The workspace outlives the container: a sandbox recreated after a host restart finds its files.
    // A new sandbox's directory is a spare, its workspace mounted already.
    if (!(await this.takeSpare(paths.root, request.agentId))) {
      await this.makeRoot(request.agentId);
      await this.mountWorkspace(paths.workspaceImage, paths.workspace, request.agentId);
    }
    const spec = sandboxSpec({
      containerId: request.agentId,
      image,
      compute: request.compute,
      rootfs,
      workspace: paths.workspace,
      execDir: paths.exec,
      guestDir: this.options.guestDir ?? GUEST_DIR,
      // A socket path has at most 107 bytes: with a data directory too long for it, no channel.
      ...(Buffer.byteLength(paths.channelSocket) <= MAX_SOCKET_PATH_BYTES ? { channelDir: paths.channel } : {}),
      ...(this.options.egress && Buffer.byteLength(paths.egressSocket) <= MAX_SOCKET_PATH_BYTES ? { egressDir: paths.egress } : {}),
      env: request.env,
      cpus: this.options.cpus,
      memoryBytes: this.options.memoryBytes,
      tmpBytes: this.options.overlayBytes,
    });
    await this.launch(request.agentId, spec, (bundle) => this.options.runsc.run(request.agentId, bundle, paths.console));
    this.options.log.info({ agentId: request.agentId, image }, 'sandbox started');
  }

  private async mountWorkspace(image: string, mountPoint: string, agentId: string): Promise<void> {
    try {
      await ensureVolume(image, mountPoint, this.options.workspaceBytes);
    } catch (error) {
      throw new ProviderError(this.name, `could not mount the sandbox's workspace: ${(error as Error).message}`, { sandbox: agentId });
    }
  }

  /**
   * Makes `directory` (not there yet) a spare workspace's directory: `workspace.ext4` mounted at
   * `workspace`, readable by root only. False when it is there already or no spare is ready.
   */
  private async takeSpare(directory: string, agentId: string): Promise<boolean> {
    if (this.spares === undefined || existsSync(directory)) return false;
    try {
      if (!(await this.spares.take(directory))) return false;
    } catch (error) {
      throw new ProviderError(this.name, `could not mount the sandbox's workspace: ${(error as Error).message}`, { sandbox: agentId });
    }
    chmodSync(this.options.sandboxDir, 0o700);
    return true;
  }

  /**
   * Writes the bundle and starts the container with `start`, then guards its memory; a container
   * that failed to start is removed.
   */
  private async launch(containerId: string, spec: Record<string, unknown>, start: (bundle: string) => Promise<void>): Promise<void> {
    const paths = this.paths(containerId);
    this.channelSpec.set(containerId, channelSpecOf(spec));
    this.channelLate.delete(containerId);
    try {
      // The bundle, the exec folder and the listeners are made at once: none waits for another.
      // Listening before the sandbox starts: its launcher connects as soon as it runs.
      await allOrFirstFailure([
        // Only root reads it: the process environment in it holds the agent's secrets.
        mkdir(paths.bundle, { recursive: true }).then(() => writeFile(join(paths.bundle, 'config.json'), JSON.stringify(spec, null, 2), { mode: 0o600 })),
        mkdir(paths.exec, { recursive: true }),
        hasChannel(spec) ? this.listenOrWarn(containerId) : undefined,
        hasEgress(spec) ? this.openEgress(containerId) : undefined,
      ] as const);
      await start(paths.bundle);
    } catch (error) {
      await this.options.runsc.delete(containerId).catch(() => undefined);
      throw new ProviderError(this.name, `could not start the sandbox: ${(error as Error).message}`, { sandbox: containerId });
    }
    await this.guardMemory(containerId, spec);
  }

  /**
   * Starts the sandbox from a snapshot: its processes and memory too when `native` was asked and
   * this host can (else its files only, and the log says why). The archive is extracted aside
   * and used only when its digest matched; the scratch goes whatever happens, and the snapshot
   * itself is never changed, so a restore that failed can be tried again.
   */
  private async restore(request: ProvisionRequest, source: RestoreSource, image: ImageName): Promise<void> {
    const agentId = request.agentId;
    const paths = this.paths(agentId);
    const kept = this.keptDir(agentId, source.key);
    if (existsSync(kept)) return this.restoreKept(request, source, kept, image);
    if (source.takenOf !== undefined && source.takenOf !== agentId && source.level === 'native' && (await this.restoreFork(request, source, source.takenOf, image))) return;
    const key = storedArchiveOf(this.name, source).key;
    // Ask for the image before reading the archive: while it builds, each retry would read it again.
    const rootfs = source.level === 'filesystem' ? await this.options.images.ready(image) : undefined;
    const manifest = await this.extractSnapshot(agentId, source);
    try {
      const notNative = source.level === 'native' ? await this.whyNotNative(manifest, paths.restoring) : 'files were asked for';
      const checkpointedSpec = notNative === undefined ? manifest?.sandbox?.spec : undefined;
      // The restored filesystem takes the place of the workspace's.
      await unmountVolume(paths.workspace);
      await rm(paths.workspace, { recursive: true, force: true });
      await rm(paths.workspaceImage, { force: true });
      await unmountVolume(join(paths.restoring, WORKSPACE_DIR));
      await rename(paths.restoringImage, paths.workspaceImage);
      await this.mountWorkspace(paths.workspaceImage, paths.workspace, agentId);
      if (checkpointedSpec) {
        await this.startFromCheckpoint(agentId, checkpointedSpec, join(paths.restoring, CHECKPOINT_DIR), request.env);
      } else {
        if (source.level === 'native') {
          this.options.log.warn({ agentId, key, reason: notNative }, 'restoring the files of a native snapshot only');
        }
        await this.start(request, image, rootfs ?? (await this.options.images.ready(image)));
      }
      this.options.log.info({ agentId, key, level: checkpointedSpec ? 'native' : 'filesystem' }, 'sandbox restored');
    } catch (error) {
      if (error instanceof ProviderError) throw error;
      const details = { sandbox: agentId, key };
      throw new ProviderError(this.name, `restoring snapshot archive ${key} failed: ${(error as Error).message}`, details);
    } finally {
      await this.discardRestoring(agentId);
    }
  }

  /**
   * Starts the sandbox from the checkpoint it kept on this host when it was paused, and its
   * workspace where it is: nothing to read from storage, decompress or extract. Before the archive
   * is stored, the workspace is copied aside for it first (see `keepWorkspaceCopy`). The kept
   * checkpoint stays until the operator discards it (`discardCheckpoint`).
   */
  private async restoreKept(request: ProvisionRequest, source: RestoreSource, kept: string, image: ImageName): Promise<void> {
    const agentId = request.agentId;
    const paths = this.paths(agentId);
    try {
      const manifest = parseManifest(await readFile(join(kept, MANIFEST_FILE), 'utf8'));
      const notNative = source.level === 'native' ? await this.whyNotNative(manifest, kept) : 'files were asked for';
      // In turn with the forks copying this workspace (`restoreFork`): none copies it while it runs again.
      await this.inTurn(agentId, async () => {
        if (!source.archive) await this.keepWorkspaceCopy(agentId, kept);
        await this.mountWorkspace(paths.workspaceImage, paths.workspace, agentId);
        if (notNative === undefined && manifest.sandbox) {
          await this.startFromCheckpoint(agentId, manifest.sandbox.spec, join(kept, CHECKPOINT_DIR), request.env);
        } else {
          if (source.level === 'native') this.options.log.warn({ agentId, key: source.key, reason: notNative }, 'restoring the files of a native snapshot only');
          await this.start(request, image, await this.options.images.ready(image));
        }
      });
      this.options.log.info({ agentId, key: source.key, level: notNative === undefined ? 'native' : 'filesystem', from: 'kept checkpoint' }, 'sandbox restored');
    } catch (error) {
      if (error instanceof ProviderError) throw error;
      throw new ProviderError(this.name, `restoring the kept checkpoint of snapshot ${source.key} failed: ${(error as Error).message}`, { sandbox: agentId, key: source.key });
    }
  }

  /**
   * A fork (ADR 45): starts this agent from the checkpoint another agent keeps on this host, with a
   * copy of that agent's workspace as it was checkpointed, without the archive. The copy is the one
   * kept beside the checkpoint (made when that agent ran again before the archive), or made now
   * while that agent is still paused, in turn with its own restore. False when neither can be had
   * (that agent runs again and no copy was kept, or the checkpoint is gone): the archive is used.
   */
  private async restoreFork(request: ProvisionRequest, source: RestoreSource, takenOf: string, image: ImageName): Promise<boolean> {
    const agentId = request.agentId;
    const theirs = this.keptDir(takenOf, source.key);
    if (!existsSync(join(theirs, MANIFEST_FILE))) return false;
    const paths = this.paths(agentId);
    const copied = await this.inTurn(takenOf, async () => {
      if (!existsSync(theirs)) return false;
      if (!existsSync(join(theirs, KEPT_WORKSPACE_IMAGE))) {
        if ((await this.options.runsc.state(takenOf)) === 'running') return false;
        await this.keepWorkspaceCopy(takenOf, theirs);
      }
      await this.makeRoot(agentId);
      await rm(paths.workspaceImage, { force: true });
      await copyImage(join(theirs, KEPT_WORKSPACE_IMAGE), `${paths.workspaceImage}.partial`);
      await rename(`${paths.workspaceImage}.partial`, paths.workspaceImage);
      return true;
    });
    if (!copied) return false;
    try {
      const manifest = parseManifest(await readFile(join(theirs, MANIFEST_FILE), 'utf8'));
      const notNative = await this.whyNotNative(manifest, theirs);
      await this.mountWorkspace(paths.workspaceImage, paths.workspace, agentId);
      if (notNative === undefined && manifest.sandbox) {
        await this.startFromCheckpoint(agentId, manifest.sandbox.spec, join(theirs, CHECKPOINT_DIR), request.env);
      } else {
        this.options.log.warn({ agentId, key: source.key, reason: notNative }, 'restoring the files of a native snapshot only');
        await this.start(request, image, await this.options.images.ready(image));
      }
      this.options.log.info({ agentId, key: source.key, from: takenOf }, 'sandbox restored from the checkpoint another agent keeps on this host');
      return true;
    } catch (error) {
      if (error instanceof ProviderError) throw error;
      throw new ProviderError(this.name, `restoring the kept checkpoint of snapshot ${source.key} of agent ${takenOf} failed: ${(error as Error).message}`, { sandbox: agentId, key: source.key });
    }
  }

  private async discardRestoring(agentId: string): Promise<void> {
    const paths = this.paths(agentId);
    await unmountVolume(join(paths.restoring, WORKSPACE_DIR));
    await rm(paths.restoring, { recursive: true, force: true });
    await rm(paths.restoringImage, { force: true });
  }

  /**
   * Extracts the archive into the sandbox's `restoring` directory through a digest check, and
   * reads its manifest, if it has one. On any failure nothing is left behind; a digest mismatch
   * is reported as corruption (`details.corrupted`), other failures (storage unreachable) as
   * worth a retry.
   */
  private async extractSnapshot(agentId: string, source: RestoreSource): Promise<SnapshotManifest | undefined> {
    const { storage } = source;
    const archive = storedArchiveOf(this.name, source);
    const paths = this.paths(agentId);
    const existed = existsSync(paths.root);
    await this.discardRestoring(agentId); // a crash's leftovers
    try {
      await this.makeRoot(agentId);
      // The workspace is extracted straight into a new filesystem of the workspace's size: an
      // archive too large for it fails here, with the host disk untouched.
      if (await this.takeSpare(paths.restoring, agentId)) {
        await rename(join(paths.restoring, VOLUME_IMAGE), paths.restoringImage);
      } else {
        await mkdir(paths.restoring, { mode: 0o700 });
        await ensureVolume(paths.restoringImage, join(paths.restoring, WORKSPACE_DIR), this.options.workspaceBytes);
      }
      await extractArchive(await storage.get(archive.key), verifyArchive(archive.key, archive.sha256), paths.restoring);
      const manifest = join(paths.restoring, MANIFEST_FILE);
      return existsSync(manifest) ? parseManifest(await readFile(manifest, 'utf8')) : undefined;
    } catch (error) {
      await this.discardRestoring(agentId).catch(() => undefined); // the first error is the one to report
      if (!existed) await rmdir(paths.root).catch(() => undefined); // a sandbox that is not there yet
      const details = { sandbox: agentId, key: archive.key };
      if (error instanceof ArchiveIntegrityError) throw new ProviderError(this.name, error.message, { ...details, corrupted: true });
      if (error instanceof ArchiveNotFoundError) throw new ProviderError(this.name, error.message, details);
      throw new ProviderError(this.name, `could not read snapshot archive ${archive.key}: ${(error as Error).message}`, details);
    }
  }

  private async whyNotNative(manifest: SnapshotManifest | undefined, extracted: string): Promise<string | undefined> {
    return whyNotNative(manifest, {
      hasCheckpoint: existsSync(join(extracted, CHECKPOINT_DIR)),
      rootfsExists: manifest?.sandbox !== undefined && existsSync(join(manifest.sandbox.rootfs, 'usr', 'bin')),
      runtime: await this.runtime(),
    });
  }

  /** Restores the checkpointed container, with the spec it ran with, as this agent's sandbox. */
  private async startFromCheckpoint(
    agentId: string,
    checkpointedSpec: Record<string, unknown>,
    imageDir: string,
    env: Record<string, string>,
  ): Promise<void> {
    const paths = this.paths(agentId);
    const spec = restoreSpec(checkpointedSpec, {
      containerId: agentId,
      workspace: paths.workspace,
      execDir: paths.exec,
      guestDir: this.options.guestDir ?? GUEST_DIR,
      channelDir: paths.channel,
      egressDir: paths.egress,
      env,
    });
    await this.launch(agentId, spec, (bundle) => this.options.runsc.restore(agentId, bundle, imageDir, paths.console));
  }

  /** Deletes a checkpointed sandbox's container (by its delete armed during the checkpoint) without waiting for it; see `released`. */
  private releaseInBackground(agentId: string, armedDelete: Pick<ArmedStep, 'run'>): void {
    const deleting = armedDelete
      .run()
      .catch((error: unknown) => this.options.log.warn({ agentId, err: error }, 'deleting a checkpointed sandbox failed; the next start of it retries'))
      .finally(() => {
        if (this.releasing.get(agentId) === deleting) this.releasing.delete(agentId);
      });
    this.releasing.set(agentId, deleting);
  }

  /** Waits for the background delete of the agent's checkpointed container, if one is under way. */
  private async released(agentId: string): Promise<void> {
    await this.releasing.get(agentId);
  }

  async state(ref: SandboxRef): Promise<SandboxState> {
    await this.released(ref.id);
    const status = await this.options.runsc.state(ref.id);
    if (status === undefined) return 'missing';
    return status === 'running' ? 'running' : 'stopped';
  }

  /**
   * The host writes the program into the sandbox's read-only exec mount and has the sandbox's
   * launcher run it with a time limit, after which the launcher stops the program and its
   * children inside the sandbox (see launcher.ts: what an exec starts then survives a native
   * checkpoint). The request goes over the launcher's channel (channel.ts), no host process per
   * call; a sandbox whose launcher has no channel (one started by an older Berth) gets a
   * `runsc exec` of the launcher's client instead. No shell, as each process started in gVisor
   * costs about 10 ms.
   */
  async exec(ref: SandboxRef, request: ExecRequest): Promise<ExecResult> {
    return this.runProgram(ref, request);
  }

  /** The exec with its output given to `request.onOutput` as it comes (over the channel only). */
  async execStream(ref: SandboxRef, request: StreamExecRequest): Promise<ExecResult> {
    await this.connectionOf(ref);
    return this.runProgram(ref, request);
  }

  private async runProgram(ref: SandboxRef, request: ExecRequest & Partial<Pick<StreamExecRequest, 'onOutput' | 'signal'>>): Promise<ExecResult> {
    if (request.stdin !== undefined) await this.connectionOf(ref);
    const { argv, hostFile } = await this.writeProgram(ref, request);
    const started = performance.now();
    try {
      const overChannel = (await this.launcherConnected(ref.id))
        ? this.channels.exec(ref.id, {
            argv,
            env: { ...this.channelSpec.get(ref.id)?.env, ...EXEC_ENV, ...request.env },
            cwd: request.cwd ?? '/workspace',
            limitMs: request.timeoutMs,
            maxOutputBytes: this.maxOutputBytes(),
            // The launcher's limit ends the program first; this one covers a sandbox that stops answering.
            timeoutMs: request.timeoutMs + 5_000,
            ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
            ...(request.onOutput ? { onOutput: request.onOutput } : {}),
            ...(request.signal ? { signal: request.signal } : {}),
          })
        : undefined;
      const result = overChannel ? await overChannel : await this.execViaClient(ref, argv, request);
      if (result.kind === 'timedOut') throw new ExecTimeoutError(request.timeoutMs);
      if (result.kind === 'lost') {
        await this.assertAnswering(ref);
        throw new ProviderError(this.name, "the sandbox's launcher went away during the exec", { sandbox: ref.id });
      }
      const { outcome } = result;
      if (outcome.outcome === 'timedOut') throw new ExecTimeoutError(request.timeoutMs);
      if (outcome.outcome === 'failed') {
        // The launcher could not run it, or could not be reached: the sandbox's state decides what to report.
        await this.assertAnswering(ref);
        throw new ProviderError(this.name, outcome.error, { sandbox: ref.id });
      }
      return {
        stdout: result.stdout,
        stderr: result.stderr + this.outOfMemoryNotice(ref.id, outcome.exitCode, started),
        exitCode: outcome.exitCode,
        durationMs: result.durationMs,
      };
    } finally {
      // Not awaited: the answer does not wait for the program file to go.
      void rm(hostFile, { force: true }).catch(() => undefined);
    }
  }

  /** Writes the program into the sandbox's read-only exec mount; the argv that runs it there. */
  private async writeProgram(ref: SandboxRef, request: Pick<ExecRequest, 'language' | 'code'>): Promise<{ argv: string[]; hostFile: string }> {
    const interpreter = INTERPRETERS[request.language];
    const file = `${randomUUID()}.${interpreter.extension}`;
    const hostFile = join(this.paths(ref.id).exec, file);
    try {
      // A small program is written at once: a few KiB to the host's disk take microseconds, where
      // the asynchronous write's three thread-pool hops (open, write, close) took half a millisecond
      // of an exec. A large one does not hold the event loop.
      if (request.code.length <= SYNC_PROGRAM_MAX_CHARS) writeFileSync(hostFile, request.code, { mode: 0o644 });
      else await writeFile(hostFile, request.code, { mode: 0o644 });
    } catch (error) {
      throw new ProviderError(this.name, `the sandbox's files are gone: ${(error as Error).message}`, { sandbox: ref.id });
    }
    return { argv: [...interpreter.argv, `${EXEC_MOUNT}/${file}`], hostFile };
  }

  /** The sandbox's launcher connection: streaming, terminals and background processes need it. */
  private async connectionOf(ref: SandboxRef): Promise<Connection> {
    const connection = (await this.launcherConnected(ref.id)) ? this.channels.connection(ref.id) : undefined;
    if (connection === undefined && this.channelSpec.get(ref.id) !== null) {
      // Not a launcher known to have no channel: the sandbox ended (its files may be gone too), or its launcher stopped answering.
      await this.assertAnswering(ref);
      throw new ProviderError(this.name, "the sandbox's launcher is not connected", { sandbox: ref.id });
    }
    if (connection === undefined || connection.protocol < PROTOCOL_WITH_ADR_39) {
      throw new UnsupportedRequestError(
        this.name,
        "this sandbox's launcher is from an older Berth: stdin, streaming, terminals and background processes need a newer one; terminate and create the agent again",
      );
    }
    return connection;
  }

  /** The connection of a launcher that can serve files and tunnels (protocol 3). */
  private async filesConnectionOf(ref: SandboxRef): Promise<Connection> {
    const connection = await this.connectionOf(ref);
    if (connection.protocol < PROTOCOL_WITH_ADR_40) {
      throw new UnsupportedRequestError(this.name, "this sandbox's launcher is from an older Berth: files and ports need a newer one; terminate and create the agent again");
    }
    return connection;
  }

  /** A TCP connection to `port` inside the sandbox, relayed by its launcher: the sandbox keeps no network. */
  async openPort(ref: SandboxRef, port: number): Promise<Duplex> {
    return launcherTunnel(this.name, await this.filesConnectionOf(ref), ref, port);
  }

  async openTerminal(ref: SandboxRef, request: TerminalRequest): Promise<TerminalHandle> {
    const connection = await this.connectionOf(ref);
    const session = connection.terminal(
      {
        argv: request.argv,
        env: { ...this.channelSpec.get(ref.id)?.env, ...EXEC_ENV, ...request.env },
        cwd: request.cwd ?? '/workspace',
        limitMs: request.timeoutMs,
        maxOutputBytes: Number.MAX_SAFE_INTEGER,
        timeoutMs: request.timeoutMs + 5_000,
        onOutput: (_stream, chunk) => request.onOutput(chunk),
      },
      { rows: request.rows, cols: request.cols },
    );
    return {
      write: (data) => session.write(data),
      resize: (rows, cols) => session.resize(rows, cols),
      close: () => session.cancel(),
      done: session.done.then((result) => {
        if (result.kind !== 'ended') return { exitCode: 128 + 9, signal: 9 };
        const { outcome } = result;
        if (outcome.outcome === 'failed') throw new ProviderError(this.name, outcome.error, { sandbox: ref.id });
        return { exitCode: outcome.exitCode, ...('signal' in outcome ? { signal: outcome.signal } : {}) };
      }),
    };
  }

  /**
   * Starts the program as a background process of the sandbox's launcher. Its program file stays in
   * the exec mount (bash reads a script as it runs it) until the sandbox ends.
   */
  async startBackground(ref: SandboxRef, request: BackgroundRequest): Promise<BackgroundProcess> {
    const connection = await this.connectionOf(ref);
    const { argv } = await this.writeProgram(ref, request);
    const record = await this.control(ref, () =>
      connection.background(
        {
          argv,
          env: { ...this.channelSpec.get(ref.id)?.env, ...EXEC_ENV, ...request.env },
          cwd: request.cwd ?? '/workspace',
          limitMs: request.timeoutMs,
          maxOutputBytes: 0,
          ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
          ...(request.keepStdin ? { keepStdin: true } : {}),
        },
        CONTROL_WAIT_MS,
      ),
    );
    return backgroundProcess(record);
  }

  async listBackground(ref: SandboxRef): Promise<BackgroundProcess[]> {
    const connection = await this.connectionOf(ref);
    const answer = await this.control(ref, () => connection.control({ op: 'list' }, CONTROL_WAIT_MS));
    return z.object({ processes: z.array(backgroundProcessSchema) }).parse(answer).processes.map(backgroundProcess);
  }

  async signalBackground(ref: SandboxRef, pid: number, signal: ProcessSignal): Promise<BackgroundProcess> {
    const connection = await this.connectionOf(ref);
    return backgroundProcess(backgroundProcessSchema.parse(await this.control(ref, () => connection.control({ op: 'signal', pid, signal }, CONTROL_WAIT_MS), pid)));
  }

  async waitBackground(ref: SandboxRef, pid: number, timeoutMs: number): Promise<BackgroundProcess> {
    const connection = await this.connectionOf(ref);
    const answer = await this.control(ref, () => connection.control({ op: 'wait', pid, timeoutMs }, timeoutMs + CONTROL_WAIT_MS), pid);
    return backgroundProcess(backgroundProcessSchema.parse(answer));
  }

  async backgroundOutput(ref: SandboxRef, pid: number): Promise<BackgroundOutput> {
    const connection = await this.connectionOf(ref);
    return backgroundOutput(await this.control(ref, () => connection.control({ op: 'output', pid }, CONTROL_WAIT_MS), pid));
  }

  async followBackground(ref: SandboxRef, pid: number, request: BackgroundFollowRequest): Promise<BackgroundFollow> {
    const connection = await this.connectionOf(ref);
    return this.control(ref, () => connection.follow(pid, request, CONTROL_WAIT_MS), pid);
  }

  async writeBackgroundInput(ref: SandboxRef, pid: number, data: Buffer): Promise<void> {
    const connection = await this.connectionOf(ref);
    await this.control(ref, () => connection.backgroundInput(pid, data, CONTROL_WAIT_MS), pid);
  }

  async closeBackgroundInput(ref: SandboxRef, pid: number): Promise<void> {
    const connection = await this.connectionOf(ref);
    await this.control(ref, () => connection.closeBackgroundInput(pid, CONTROL_WAIT_MS), pid);
  }

  /** A request to the launcher about background processes, its failures in the provider's terms. */
  private async control<T>(ref: SandboxRef, ask: () => Promise<T>, pid?: number): Promise<T> {
    try {
      return await ask();
    } catch (error) {
      throw controlFailure(this.name, ref, error, pid);
    }
  }

  private maxOutputBytes(): number {
    return this.options.maxOutputBytes ?? 1024 * 1024;
  }

  /**
   * Whether the sandbox's launcher is connected to its channel, waiting for it (briefly) when the
   * sandbox has one: after a start, a restore or a Berth restart it connects within a second.
   */
  private async launcherConnected(agentId: string): Promise<boolean> {
    if (this.channels.connected(agentId)) return true;
    if (!(await this.listenForLauncher(agentId)) || this.channelLate.has(agentId)) return false;
    // A sandbox that ended has no launcher to wait for: runsc exec reports it.
    if ((await this.options.runsc.state(agentId)) !== 'running') return false;
    if (await this.channels.awaitLauncher(agentId, LAUNCHER_CONNECT_MS)) return true;
    // Later execs do not wait again; they take the channel as soon as the launcher connects.
    this.channelLate.add(agentId);
    this.options.log.warn({ agentId }, "the sandbox's launcher did not connect its channel: execs go through runsc exec");
    return false;
  }

  /**
   * Listens for the launcher of a sandbox whose spec has a channel (one adopted after a restart
   * too); false when it has none, or another process listens for it.
   */
  private async listenForLauncher(agentId: string): Promise<boolean> {
    let channelSpec = this.channelSpec.get(agentId);
    if (channelSpec === undefined) {
      const spec = await readFile(join(this.paths(agentId).bundle, 'config.json'), 'utf8')
        .then((text) => JSON.parse(text) as Record<string, unknown>)
        .catch(() => undefined);
      if (spec === undefined) return false;
      channelSpec = channelSpecOf(spec);
      this.channelSpec.set(agentId, channelSpec);
    }
    return channelSpec !== null && (await this.listenOrWarn(agentId));
  }

  /** Whether this process listens for the sandbox's launcher (another Berth process on the same data directory may). */
  private async listenOrWarn(agentId: string): Promise<boolean> {
    return this.channels.listen(agentId, this.paths(agentId).channelSocket).catch((error: unknown) => {
      this.options.log.warn({ agentId, err: error }, "could not listen for the sandbox's launcher: its execs go through runsc exec");
      return false;
    });
  }

  /** The exec through a `runsc exec` of the launcher's client, for a sandbox without a channel. */
  private async execViaClient(ref: SandboxRef, argv: string[], request: ExecRequest): Promise<ChannelExecResult> {
    const { timeoutMs } = request;
    const result = await this.options.runsc.exec(
      ref.id,
      // The launcher enforces the time limit itself (TERM to the program's process group, KILL
      // two seconds later): one process fewer per exec than running it under timeout(1).
      viaLauncher(argv),
      {
        cwd: request.cwd ?? '/workspace',
        env: { ...EXEC_ENV, ...request.env, ...launcherLimit(timeoutMs) },
        stdin: '',
        timeoutMs: timeoutMs + 5_000,
        maxOutputBytes: this.maxOutputBytes(),
        channel: true,
      },
    );
    if (result.timedOut) return { kind: 'timedOut', durationMs: result.durationMs };
    // No outcome: the client never ran or did not finish (runsc failed, the sandbox is dying).
    const outcome = parseOutcome(result.channel ?? Buffer.alloc(0)) ?? {
      outcome: 'failed' as const,
      error: `the exec gave no outcome (runsc exit ${result.exitCode}${result.signal ? `, ${result.signal}` : ''}): ${lastLine(result.stderr)}`,
    };
    return { kind: 'ended', outcome, stdout: result.stdout, stderr: result.stderr, durationMs: result.durationMs };
  }

  /** What the program did not see itself: that it was killed because the sandbox ran out of memory. */
  private outOfMemoryNotice(containerId: string, exitCode: number, since: number): string {
    const kill = this.memory.lastKill(containerId);
    if (exitCode !== 128 + 9 || kill === undefined || kill.at < since) return '';
    const mib = (bytes: number) => Math.round(bytes / 1024 ** 2);
    return `berth: out of memory: killed ${kill.command} (pid ${kill.pid}, ${mib(kill.residentBytes)} MiB resident) at the sandbox's limit of ${mib(kill.limitBytes)} MiB\n`;
  }

  /**
   * Throws when the sandbox is not running any more (ended by the host's OOM killer, a fork bomb
   * that exhausted the sentry's threads, a kill from outside), and has its agent looked at now
   * rather than at its next health check. A sandbox whose state still says running is asked to
   * run `true`: one that is being killed no longer answers, though its process has not ended yet;
   * its end is awaited (briefly), so that the reconcile this wakes sees it ended. A program of the
   * user's that exits 128 costs one probe, and stays a normal result.
   */
  private async assertAnswering(ref: SandboxRef): Promise<void> {
    let state = await this.state(ref);
    if (state === 'running') {
      const probe = await this.options.runsc.exec(ref.id, ['true'], { cwd: '/', env: {}, stdin: '', timeoutMs: 10_000, maxOutputBytes: 4096 });
      if (probe.exitCode === 0) return;
      for (const deadline = Date.now() + DYING_WAIT_MS; state === 'running' && Date.now() < deadline; ) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        state = await this.state(ref);
      }
    }
    for (const listener of this.sandboxListeners) listener(ref.id);
    throw new ProviderError(this.name, `the sandbox is ${state === 'missing' ? 'gone' : state === 'running' ? 'not answering' : 'not running'}`, {
      sandbox: ref.id,
      state,
    });
  }

  /**
   * Gives the running sandbox `egress` as its policy, from its next connection on. A sandbox
   * started without the egress folder (by a Berth before egress policies, or whose directory's
   * path is too long for a socket) has no way out: a policy that allows anything is refused then.
   */
  async setEgress(ref: SandboxRef, egress: SandboxEgress): Promise<void> {
    const proxy = this.options.egress;
    // This process listens for the sandbox already (its bundle has the egress folder): no need to read the bundle again.
    if (proxy?.isListening(ref.id)) {
      proxy.setPolicy(ref.id, egress);
      return;
    }
    const spec = await readFile(join(this.paths(ref.id).bundle, 'config.json'), 'utf8')
      .then((text) => JSON.parse(text) as Record<string, unknown>)
      .catch(() => undefined);
    if (!proxy || !spec || !hasEgress(spec)) {
      if (egress.hosts.length === 0 && egress.cidrs.length === 0) return;
      throw new ProviderError(this.name, 'this sandbox has no egress path (it was started without one): terminate the agent and create it again to give it network access', {
        sandbox: ref.id,
      });
    }
    await this.openEgress(ref.id);
    proxy.setPolicy(ref.id, egress);
  }

  /** The proxy's listener for the sandbox, with its CA (made if it has none yet). */
  private async openEgress(agentId: string): Promise<void> {
    const proxy = this.options.egress;
    if (!proxy || proxy.isListening(agentId)) return;
    const paths = this.paths(agentId);
    const { socket, ca } = await prepareEgressFolder(paths.root, agentId);
    // A socket a previous Berth process listened on is left behind: this process listens anew.
    await rm(socket, { force: true });
    await proxy.listen(agentId, socket, ca);
  }

  /** Called with the agent's id when a sandbox is found dead outside a reconcile (see the operator). */
  watchSandboxes(onChange: (agentId: string) => void): { stop(): void } {
    this.sandboxListeners.add(onChange);
    // The sandboxes a previous Berth process started are guarded too, before any reconcile adopts them.
    this.options.runsc
      .running()
      .then((running) => Promise.all(running.map((containerId) => this.guardMemory(containerId))))
      .catch((error: unknown) => this.options.log.warn({ err: error }, 'could not list the running sandboxes to guard their memory'));
    return { stop: () => this.sandboxListeners.delete(onChange) };
  }

  /**
   * Archives the sandbox into `target.key` and removes it: `checkpointLocally`, `archiveCheckpoint`,
   * then the sandbox's directory goes. Each step leaves what the next call needs, so a call cut
   * short is finished by the next one: a stored archive is taken as done (only the release is
   * left), and a checkpoint kept on disk is archived again.
   */
  async checkpoint(ref: SandboxRef, target: CheckpointTarget): Promise<CheckpointResult> {
    try {
      if (!(await target.storage.exists(target.key))) await this.checkpointLocally(ref, target);
      const stored = await this.archiveCheckpoint(ref.id, target);
      await this.terminate(ref);
      return stored;
    } catch (error) {
      if (error instanceof ProviderError) throw error;
      const details = { sandbox: ref.id, key: target.key };
      throw new ProviderError(this.name, `checkpointing the sandbox failed: ${(error as Error).message}`, details);
    }
  }

  /**
   * Checkpoints the sandbox into `kept-<key hash>/` in its directory and deletes the container. The
   * image is written aside, flushed to disk and renamed into place, so a kept directory that exists
   * is complete (an earlier call's, which a repeated call takes as done). The workspace stays where
   * it is, mounted: nothing writes it while the agent is paused, and the archive reads it there.
   */
  async checkpointLocally(ref: SandboxRef, { key, native }: LocalCheckpointTarget): Promise<{ level: SnapshotLevel }> {
    const agentId = ref.id;
    const paths = this.paths(agentId);
    const kept = this.keptDir(agentId, key);
    const { runsc, log } = this.options;
    this.memory.unwatch(agentId);
    try {
      if (existsSync(kept)) {
        await this.released(agentId);
        await runsc.delete(agentId);
        return { level: await this.keptLevel(kept) };
      }
      if (!existsSync(paths.root)) {
        throw new ProviderError(this.name, `sandbox ${agentId} is gone and no checkpoint of it was kept`, { sandbox: agentId, key });
      }
      const started = performance.now();
      const partial = `${kept}.partial`;
      await rm(partial, { recursive: true, force: true });
      await mkdir(partial, { mode: 0o700 });
      // Everything that does not need the checkpoint's result is done while runsc writes it: the
      // manifest, written and flushed at the level asked for (written again in the rare case the
      // checkpoint fails), and the processes that follow the checkpoint (the workspace's sync, the
      // container's delete) created, ready to run.
      const asked: SnapshotLevel = native ? 'native' : 'filesystem';
      const checkpointed = native ? this.checkpointInto(agentId, partial) : Promise.resolve(asked);
      const armedDelete = runsc.armDelete(agentId);
      const armedSync = isMountPoint(paths.workspace).then((mounted) => (mounted ? armFilesystemSync(paths.workspace, this.options.spareProcesses) : undefined));
      let level: SnapshotLevel;
      try {
        // Settled all, so that a failure of one does not leave the checkpoint running behind the retry.
        const [reached, workspaceSync] = await allOrFirstFailure([checkpointed, armedSync, this.writeManifest(agentId, partial, asked)] as const);
        level = reached;
        // The checkpoint stopped the sandbox; its container's record goes in the background, and
        // whatever starts this agent again waits for it (`released`). After a crash, provision
        // finds the stopped container and deletes it then.
        this.releaseInBackground(agentId, armedDelete);
        if (level !== asked) await this.writeManifest(agentId, partial, level);
        // A claimed warm sandbox is restored under its agent's id, whose listener takes the channel.
        if (ref.details?.agentId !== undefined && ref.details.agentId !== agentId) await this.channels.close(agentId);
        // The workspace's filesystem is written out to disk, as the archive in storage was before
        // the pause answered; the image's files and directories are flushed meanwhile. `sync -f`
        // ends with a flush of the loop device, which the loop driver carries out as an fsync of
        // its image file: the image file needs no fsync of its own after it (ADR 55).
        await Promise.all([
          workspaceSync?.run(),
          level === 'native' && flushTree(join(partial, CHECKPOINT_DIR)),
          flushDirectory(partial),
        ]);
      } finally {
        // Whatever was armed and not run goes (a failure before the checkpoint's end).
        armedDelete.cancel();
        (await armedSync.catch(() => undefined))?.cancel();
      }
      await rename(partial, kept);
      await flushDirectory(paths.root);
      log.info({ agentId, key, level, ms: Math.round(performance.now() - started) }, 'sandbox checkpointed to disk');
      return { level };
    } catch (error) {
      if (error instanceof ProviderError) throw error;
      throw new ProviderError(this.name, `checkpointing the sandbox failed: ${(error as Error).message}`, { sandbox: agentId, key });
    }
  }

  /** `runsc checkpoint` into `partial`: the level reached ('filesystem' when runsc could not checkpoint the sandbox). */
  private async checkpointInto(agentId: string, partial: string): Promise<SnapshotLevel> {
    try {
      await this.options.runsc.checkpoint(agentId, join(partial, CHECKPOINT_DIR));
      return 'native';
    } catch (error) {
      // Not running (ended, or stopped), or runsc refused: the files are what is left to keep.
      await rm(join(partial, CHECKPOINT_DIR), { recursive: true, force: true });
      this.options.log.warn({ agentId, error: (error as Error).message }, 'checkpoint failed: the snapshot keeps the files only');
      return 'filesystem';
    }
  }

  /** Writes the manifest of a checkpoint kept in `partial`, flushed to disk. */
  private async writeManifest(agentId: string, partial: string, level: SnapshotLevel): Promise<void> {
    const manifest = localManifest({
      level,
      agentId,
      spec: JSON.parse(await readFile(join(this.paths(agentId).bundle, 'config.json'), 'utf8')) as Record<string, unknown>,
      runtime: await this.runtime(),
      createdAt: new Date(),
    });
    const file = join(partial, MANIFEST_FILE);
    await writeFile(file, JSON.stringify(manifest, null, 2), { mode: 0o600 });
    await flushFile(file);
  }

  /**
   * Packs the checkpoint kept under `key`, with the workspace, into storage (tar + zstd, hashed on
   * the way). The workspace is the sandbox's own while it stays paused, or the copy a restore
   * that came before the archive left beside the checkpoint (`keepWorkspaceCopy`). A restore of
   * the sandbox cancels an archive in progress, which then fails and is made again from the copy.
   */
  async archiveCheckpoint(agentId: string, { storage, key }: ArchiveTarget): Promise<CheckpointResult> {
    const paths = this.paths(agentId);
    const kept = this.keptDir(agentId, key);
    const details = { sandbox: agentId, key };
    try {
      if (await storage.exists(key)) return await this.describeStored(storage, key);
      if (!existsSync(kept)) {
        throw new ProviderError(this.name, `no checkpoint of sandbox ${agentId} is kept on this host, and no archive ${key} was stored`, { ...details, lost: true });
      }
      // The pause has answered, and its archive is work in the background: the spare processes
      // the pause took are made again now, where their forks hold up nothing that is waited for.
      this.options.spareProcesses?.fill();
      const started = performance.now();
      const level = await this.keptLevel(kept);
      const cancel = new AbortController();
      let finished: () => void = () => undefined;
      // Which workspace to read is decided in turn with a restore's copy (`keepWorkspaceCopy`), so
      // that the archive never begins on a workspace a restored sandbox is changing.
      const copy = await this.inTurn(agentId, async () => {
        const copied = existsSync(join(kept, KEPT_WORKSPACE_IMAGE));
        // Mounted again after a host restart; a copy is mounted for as long as the archive reads it.
        if (copied) await this.mountWorkspace(join(kept, KEPT_WORKSPACE_IMAGE), join(kept, WORKSPACE_DIR), agentId);
        else await this.mountWorkspace(paths.workspaceImage, paths.workspace, agentId);
        this.archiving.set(agentId, { key, cancel, done: new Promise<void>((resolve) => (finished = resolve)) });
        return copied;
      });
      const workspaceDir = copy ? kept : paths.root;
      try {
        const stored = await storage.put(
          key,
          packArchive(
            [
              { dir: kept, names: level === 'native' ? [MANIFEST_FILE, CHECKPOINT_DIR] : [MANIFEST_FILE] },
              { dir: workspaceDir, names: [WORKSPACE_DIR] },
            ],
            cancel.signal,
          ),
        );
        this.options.log.info({ agentId, key, level, sizeBytes: stored.sizeBytes, ms: Math.round(performance.now() - started) }, 'kept checkpoint archived');
        return { ...stored, level };
      } catch (error) {
        const cancelled = this.cancelled.get(`${agentId}/${key}`);
        if (cancelled !== undefined) throw new ProviderError(this.name, `the archive was cancelled: ${cancelled}`, { ...details, cancelled: true });
        throw error;
      } finally {
        // Done once the copy is unmounted: a terminate waiting for it then removes the directory.
        try {
          if (copy) await unmountVolume(join(kept, WORKSPACE_DIR));
        } finally {
          this.cancelled.delete(`${agentId}/${key}`);
          this.archiving.delete(agentId);
          finished();
        }
      }
    } catch (error) {
      if (error instanceof ProviderError) throw error;
      throw new ProviderError(this.name, `archiving the kept checkpoint failed: ${(error as Error).message}`, details);
    }
  }

  async discardCheckpoint(agentId: string, key: string): Promise<boolean> {
    const kept = this.keptDir(agentId, key);
    const existed = existsSync(kept) || existsSync(`${kept}.partial`);
    if (!existed) return false;
    await unmountVolume(join(kept, WORKSPACE_DIR));
    await rm(kept, { recursive: true, force: true });
    await rm(`${kept}.partial`, { recursive: true, force: true });
    return true;
  }

  /** Where the checkpoint for snapshot archive `key` is kept, in the sandbox's directory. */
  private keptDir(agentId: string, key: string): string {
    return join(this.paths(agentId).root, `kept-${createHash('sha256').update(key).digest('hex').slice(0, 16)}`);
  }

  private async keptLevel(kept: string): Promise<SnapshotLevel> {
    return parseManifest(await readFile(join(kept, MANIFEST_FILE), 'utf8')).level;
  }

  /**
   * A restore is about to change the workspace that a kept checkpoint not archived yet still
   * needs: an archive in progress is cancelled, and the workspace's filesystem is copied beside the
   * checkpoint (sparse, so a file of the used blocks), which the archive then reads instead.
   */
  private async keepWorkspaceCopy(agentId: string, kept: string): Promise<void> {
    const paths = this.paths(agentId);
    await this.cancelArchive(agentId, 'a restore of its sandbox came first; it is made again from the workspace as it was paused');
    const copy = join(kept, KEPT_WORKSPACE_IMAGE);
    if (existsSync(copy)) return;
    if (await isMountPoint(paths.workspace)) await syncFilesystem(paths.workspace);
    await copyImage(paths.workspaceImage, `${copy}.partial`);
    await rename(`${copy}.partial`, copy);
  }

  /** Ends the agent's archive in progress, if any, and waits until it has let go of its files (and unmounted a workspace copy). */
  private async cancelArchive(agentId: string, why: string): Promise<void> {
    const running = this.archiving.get(agentId);
    if (!running) return;
    this.cancelled.set(`${agentId}/${running.key}`, why);
    running.cancel.abort();
    await running.done;
  }

  /** Runs `work` after the agent's earlier turns (archives choosing their workspace, restores copying it) ended. */
  private async inTurn<T>(agentId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.workspaceTurns.get(agentId) ?? Promise.resolve();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const mine = previous.then(() => gate);
    this.workspaceTurns.set(agentId, mine);
    await previous;
    try {
      return await work();
    } finally {
      release();
      if (this.workspaceTurns.get(agentId) === mine) this.workspaceTurns.delete(agentId);
    }
  }

  /** `runsc --version`, asked once: runsc is installed before Berth starts and not replaced under it. */
  private runtime(): Promise<string> {
    this.runtimeVersionOnce ??= this.options.runsc.version().catch((error: unknown) => {
      this.runtimeVersionOnce = undefined;
      throw error;
    });
    return this.runtimeVersionOnce;
  }

  /** What an archive stored by an earlier call holds, read back from storage. */
  private async describeStored(storage: SnapshotStorage, key: string): Promise<CheckpointResult> {
    const { content, sha256, sizeBytes } = await readMember(await storage.get(key), MANIFEST_FILE);
    return { key, sizeBytes, sha256, level: parseManifest(content).level };
  }

  async terminate(ref: SandboxRef): Promise<void> {
    // A sandbox from a warm pool has two names: the warm sandbox's (its first container) and its
    // agent's (the link to its directory, and its container once restored). Both go.
    const agentId = ref.details?.agentId ?? (this.aliases.has(ref.id) ? ref.id : undefined);
    const containers = [...new Set([ref.id, ...(agentId !== undefined ? [agentId, this.aliases.sandboxOf(agentId)] : [])])].filter((id): id is string => id !== undefined);
    for (const containerId of containers) {
      await this.released(containerId);
      this.memory.unwatch(containerId);
      await this.options.egress?.close(containerId);
      await this.channels.close(containerId);
      this.channelSpec.delete(containerId);
      this.channelLate.delete(containerId);
      try {
        await this.options.runsc.kill(containerId);
        await this.options.runsc.delete(containerId);
      } catch (error) {
        if (!(error instanceof RunscError)) throw error;
        throw new ProviderError(this.name, error.message);
      }
    }
    const paths = this.paths(ref.id);
    // Its snapshots go with it: an archive still reading a kept checkpoint (with a workspace copy
    // mounted in it) ends first, so that the directory can go at once.
    await this.cancelArchive(agentId ?? ref.id, 'its agent was terminated');
    try {
      await unmountVolume(join(paths.restoring, WORKSPACE_DIR));
      await unmountVolume(paths.workspace);
    } catch (error) {
      throw new ProviderError(this.name, `could not unmount the sandbox's workspace: ${(error as Error).message}`, { sandbox: ref.id });
    }
    await rm(paths.root, { recursive: true, force: true });
    if (agentId !== undefined && this.aliases.has(agentId)) {
      await rm(join(this.options.sandboxDir, agentId), { force: true });
      this.aliases.delete(agentId);
    }
  }
}

function channelSpecOf(spec: Record<string, unknown>): { env: Record<string, string> } | null {
  if (!hasChannel(spec)) return null;
  const entries = (spec as { process?: { env?: string[] } }).process?.env ?? [];
  return { env: Object.fromEntries(entries.filter((entry) => entry.includes('=')).map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)])) };
}

function lastLine(text: string): string {
  return text.trimEnd().split('\n').at(-1) ?? '';
}

/** Waits for every promise to settle; the values if all were fulfilled, else the first rejection. */
async function allOrFirstFailure<T extends readonly unknown[]>(promises: T): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((result) => (result as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}
