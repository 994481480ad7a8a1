import type { Duplex, Readable } from 'node:stream';
import type { Compute, SandboxRef } from '@berth/crds';
import type { SnapshotStorage, StoredArchive } from './snapshot-storage.js';

export type ExecLanguage = (typeof EXEC_LANGUAGES)[number];
export const EXEC_LANGUAGES = ['python', 'typescript', 'bash'] as const;

export interface ExecRequest {
  language: ExecLanguage;
  code: string;
  /** The process is killed and `ExecTimeoutError` thrown when it runs longer. */
  timeoutMs: number;
  /** Added to the sandbox's environment for this program (a provider without `env` in `execOptions` is never given it). */
  env?: Record<string, string>;
  /** The working directory: an absolute, normalised path under /workspace (the API checks it). */
  cwd?: string;
  /** Written to the program's stdin, which is then closed; without it stdin is empty. */
  stdin?: Buffer;
}

/** The exec options beyond language and code that a provider may honour (ADR 39). */
export type ExecOption = 'env' | 'cwd' | 'stdin';
export const EXEC_OPTIONS: readonly ExecOption[] = ['env', 'cwd', 'stdin'];

/** A streamed exec: output goes to `onOutput` as it comes; `signal` ends the program. */
export interface StreamExecRequest extends ExecRequest {
  onOutput(stream: 'stdout' | 'stderr', chunk: Buffer): void;
  signal?: AbortSignal;
}

/** A program on a terminal of its own (a pty), for a person at a console. */
export interface TerminalRequest {
  argv: string[];
  env?: Record<string, string>;
  cwd?: string;
  rows: number;
  cols: number;
  /** The program is killed after this long (the agent's remaining time). */
  timeoutMs: number;
  onOutput(chunk: Buffer): void;
}

export interface TerminalHandle {
  write(data: Buffer): void;
  resize(rows: number, cols: number): void;
  /** Kills the program; `done` settles then. */
  close(): void;
  readonly done: Promise<{ exitCode: number; signal?: number }>;
}

/** A background process (`background: true`): it runs on after the request that started it. */
export interface BackgroundProcess {
  pid: number;
  argv: string[];
  startedAt: string;
  status: 'running' | 'exited' | 'signaled' | 'timedOut' | 'failed';
  exitCode: number | null;
  endedAt: string | null;
}

/** What a background process printed: the last bytes of each stream, and how many before them were dropped. */
export interface BackgroundOutput extends BackgroundProcess {
  stdout: string;
  stderr: string;
  dropped: { stdout: number; stderr: number };
}

/** A background process's start: an exec that returns at once. */
export type BackgroundRequest = Omit<ExecRequest, 'timeoutMs'> & {
  timeoutMs?: number;
  /** Its stdin stays open as a pipe (after `stdin`, if given) for writeBackgroundInput, until closeBackgroundInput; otherwise it ends after `stdin`. */
  keepStdin?: boolean;
};

/** What a follow of a background process's output is given (followBackground). */
export interface BackgroundFollowRequest {
  /**
   * Bytes of stdout and stderr already seen: what the process printed past them and the sandbox
   * still keeps comes first. Without it, the follow starts at what is printed from now on.
   */
  from?: { stdout: number; stderr: number };
  /** Each chunk as the process prints it, stdout and stderr in the order they came. */
  onOutput(stream: 'stdout' | 'stderr', chunk: Buffer): void;
}

/** A follow under way: the sandbox pushes the process's output as it comes. */
export interface BackgroundFollow {
  /** The process when the follow began. */
  process: BackgroundProcess;
  /** The process once it ended (its last output came before); undefined once `stop` ended the follow; rejected when the follow was lost. */
  ended: Promise<BackgroundProcess | undefined>;
  /** Ends the follow; the process runs on. */
  stop(): void;
}

/** Bytes kept of each of a background process's stdout and stderr (the last ones). */
export const BACKGROUND_OUTPUT_BYTES = 1024 * 1024;

export type ProcessSignal = (typeof PROCESS_SIGNALS)[number];
export const PROCESS_SIGNALS = ['TERM', 'KILL', 'INT', 'HUP', 'QUIT', 'USR1', 'USR2', 'STOP', 'CONT'] as const;

/** No background process with that pid in the sandbox (or it ended long enough ago to be forgotten). */
export class ProcessNotFoundError extends Error {
  override name = 'ProcessNotFoundError';
  constructor(readonly pid: number) {
    super(`no background process ${pid} in this sandbox`);
  }
}

/** Where a sandbox's files may be read and written (ADR 40): paths resolve, symlinks followed in the sandbox, under it. */
export const WORKSPACE_ROOT = '/workspace';

export type FileType = 'file' | 'directory' | 'symlink' | 'other';

/** One entry of a sandbox's filesystem (a symlink is described itself, not followed). */
export interface FileInfo {
  name: string;
  /** Absolute, with symlinks of the directories above it resolved. */
  path: string;
  type: FileType;
  size: number;
  /** Permission bits (0o644 is 420). */
  mode: number;
  modifiedAt: string;
  /** A symlink's target, as written. */
  target?: string;
}

/**
 * Why a file request was refused: `outside` (the path resolves outside /workspace), `not_found`,
 * `exists`, `not_directory`, `is_directory`, `not_empty`, `no_space` (the workspace is full),
 * `forbidden`, `bad_request`, `io_error`.
 */
export type FileErrorCode = 'outside' | 'not_found' | 'exists' | 'not_directory' | 'is_directory' | 'not_empty' | 'no_space' | 'forbidden' | 'bad_request' | 'io_error';
export const FILE_ERROR_CODES: readonly FileErrorCode[] = ['outside', 'not_found', 'exists', 'not_directory', 'is_directory', 'not_empty', 'no_space', 'forbidden', 'bad_request', 'io_error'];

export class SandboxFileError extends Error {
  override name = 'SandboxFileError';
  constructor(
    readonly code: FileErrorCode,
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}

/**
 * A sandbox's files (ADR 40), for providers that can reach them. Every path is absolute and under
 * WORKSPACE_ROOT as the API normalised it; the provider resolves symlinks inside the sandbox and
 * throws SandboxFileError `outside` for one that leaves it. Bodies are streams both ways, never
 * held whole in memory.
 */
export interface SandboxFiles {
  stat(ref: SandboxRef, path: string): Promise<FileInfo>;
  /** A directory's entries by name, and how many past the listing's limit were left out. */
  list(ref: SandboxRef, path: string): Promise<{ entries: FileInfo[]; omitted: number }>;
  /** A file's bytes as they are read. */
  read(ref: SandboxRef, path: string): Promise<{ info: FileInfo; body: Readable }>;
  /** Writes `body` to `path` whole or not at all (written aside, renamed into place at its end). */
  write(ref: SandboxRef, path: string, body: Readable, options: { mode?: number; parents?: boolean }): Promise<FileInfo>;
  mkdir(ref: SandboxRef, path: string, options: { parents?: boolean }): Promise<FileInfo>;
  remove(ref: SandboxRef, path: string, options: { recursive?: boolean }): Promise<void>;
  move(ref: SandboxRef, from: string, to: string, options: { overwrite?: boolean }): Promise<FileInfo>;
  /** A directory as a tar archive (ustar/GNU, entries relative to it), streamed as it is made. */
  archive(ref: SandboxRef, path: string): Promise<{ info: FileInfo; body: Readable }>;
  /**
   * A directory's changes as they happen in the sandbox (ADR 51), those in every directory under
   * it too with `recursive`. Absent when the provider cannot watch: the API answers 501 naming
   * `files.watch`.
   */
  watch?(ref: SandboxRef, path: string, options: { recursive?: boolean }): Promise<FileWatch>;
}

/** What happened to an entry, by envd's names: a rename is the old name's `rename` and the new name's `create`. */
export type FileChangeType = 'create' | 'write' | 'remove' | 'rename' | 'chmod';
export const FILE_CHANGE_TYPES: readonly FileChangeType[] = ['create', 'write', 'remove', 'rename', 'chmod'];

/** One change under a watched directory; `name` is relative to it (`sub/file.txt`). */
export interface FileChange {
  name: string;
  type: FileChangeType;
}

/**
 * A directory being watched. `changes` yields each change as it comes and ends when the watch is
 * closed; it throws SandboxFileError `not_found` when the directory itself was removed or moved,
 * and a ProviderError when the sandbox went away (it ended, or was paused: a watch does not
 * outlive a checkpoint). Changes are read at the pace of whoever iterates: the sandbox holds the
 * rest, and a watch left unread long enough ends with `io_error` (its changes overflowed).
 */
export interface FileWatch {
  /** The watched directory. */
  info: FileInfo;
  changes: AsyncIterable<FileChange>;
  /** Stops the watch in the sandbox; the iteration ends. */
  close(): void;
}

/** Nothing accepts connections on the port inside the sandbox. */
export class PortClosedError extends Error {
  override name = 'PortClosedError';
  constructor(
    readonly port: number,
    message: string,
  ) {
    super(message);
  }
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  durationMs: number;
}

export interface ProvisionRequest {
  agentId: string;
  sessionId: string;
  timeoutSeconds: number;
  /** The Agent resource, for providers that give their sandboxes an owner. */
  owner?: { apiVersion: string; kind: string; name: string; uid: string };
  /** Start from a snapshot instead of an empty sandbox. */
  restore?: RestoreSource;
  compute: Compute;
  browser: boolean;
  gpu?: string;
  storage?: string;
  env: Record<string, string>;
  /** Where the sandbox may connect through the egress proxy; absent: nowhere (ADR 46). */
  egress?: SandboxEgress;
}

/**
 * An agent's egress policy as its provider enforces it: the allow-list, and the credential headers
 * with their secrets' values resolved (they stay on the host, in the proxy, never in the sandbox).
 */
export interface SandboxEgress {
  hosts: string[];
  cidrs: string[];
  credentials: { host: string; header: string; value: string }[];
}

/** Whether the policy lets the sandbox reach anything (else it is the default: no network). Pure. */
export function egressAllowsAnything(egress: SandboxEgress | undefined): boolean {
  return egress !== undefined && (egress.hosts.length > 0 || egress.cidrs.length > 0);
}

/**
 * `pending`: being started (a pod not yet running); `expired`: ended by the platform at its
 * deadline (a pod's activeDeadlineSeconds), which is the agent's timeout, not a loss.
 */
export type SnapshotLevel = 'native' | 'filesystem';

/** A snapshot to start a sandbox from, and how much of it to bring back. */
export interface RestoreSource {
  storage: SnapshotStorage;
  /** The snapshot's archive key: also names the checkpoint a provider may still keep on its host (`checkpointLocally`). */
  key: string;
  /**
   * The stored archive; absent while the snapshot is still `creating`, when only the provider
   * that keeps its checkpoint on this host can restore it (others answer `SandboxNotReadyError`).
   */
  archive?: StoredArchive;
  /** `native`: processes and memory too (same provider, which made it natively); `filesystem`: /workspace only. */
  level: SnapshotLevel;
  /**
   * For a fork (ADR 45): the agent the snapshot was taken of. The fork may start from the
   * checkpoint that agent keeps on this host, without the archive.
   */
  takenOf?: string;
}

/** The stored archive of `source`; a snapshot not archived yet is asked for again later. */
export function storedArchiveOf(provider: string, source: RestoreSource): StoredArchive {
  if (source.archive) return source.archive;
  throw new SandboxNotReadyError(provider, `snapshot archive ${source.key} is still being stored`, 1_000);
}

/** Where a checkpoint goes, and whether processes and memory should be kept if the provider can. */
export interface CheckpointTarget {
  storage: SnapshotStorage;
  key: string;
  native: boolean;
}

export interface CheckpointResult extends StoredArchive {
  level: SnapshotLevel;
}

/** Where `archiveCheckpoint` stores the archive of a checkpoint kept on the host (its level is the checkpoint's). */
export interface ArchiveTarget {
  storage: SnapshotStorage;
  key: string;
}

/** Where `checkpointLocally` keeps a checkpoint on the host, and whether processes and memory should be kept. */
export interface LocalCheckpointTarget {
  key: string;
  native: boolean;
}

export type SandboxState = 'running' | 'pending' | 'stopped' | 'expired' | 'missing';

export interface ProviderCapabilities {
  computes: readonly Compute[];
  /** A browser-capable template is configured. */
  browser: boolean;
  /** GPU types an agent may ask for; empty when the provider has none. */
  gpuTypes: readonly string[];
  storage: boolean;
  checkpoint: 'native' | 'filesystem' | 'none';
  /** What each sandbox gets, where every sandbox of the provider gets the same (reported by the E2B-compatible surface). */
  sandboxSize?: { cpus: number; memoryBytes: number; diskBytes: number };
  /** It enforces egress policies (ADR 46); without it an agent may have none that allows anything. */
  egress?: boolean;
  /**
   * A warm sandbox it hands to an agent takes the agent's egress policy (setEgress on the running
   * sandbox, ADR 46). Without it an agent with a policy starts cold: the provider applies the
   * policy where it makes the sandbox (the Kubernetes pod's spec, ADR 52), which a claim skips.
   */
  egressOnClaim?: boolean;
  /**
   * Its hand-over of a warm sandbox (`claimWarm`) is quick work on this host (a link and a file
   * write), so the reconciler holds the claim's transaction open across it and commits the claim
   * with the agent's status, one commit for both (ADR 45). Without it (a pod's launcher reached
   * over the network, ADR 53) the claim commits on its own before the hand-over.
   */
  handOverInTransaction?: boolean;
}

/**
 * Runs sandboxes. Every operation is idempotent on the agent: provisioning an agent whose
 * sandbox already runs adopts it, terminating one that is gone succeeds. A sandbox is named
 * after its agent, so `terminate({ provider, id: <agent id> })` ends it even when the ref
 * that `provision` returned was never recorded.
 */
export interface SandboxProvider {
  readonly name: string;
  readonly capabilities: ProviderCapabilities;
  provision(request: ProvisionRequest): Promise<SandboxRef>;
  state(ref: SandboxRef): Promise<SandboxState>;
  exec(ref: SandboxRef, request: ExecRequest): Promise<ExecResult>;
  terminate(ref: SandboxRef): Promise<void>;
  /**
   * Saves the sandbox into `target` and releases its compute (the sandbox is gone afterwards).
   * Idempotent: after a crash half-way, calling it again finishes the job.
   */
  checkpoint(ref: SandboxRef, target: CheckpointTarget): Promise<CheckpointResult>;
  /**
   * The first half of a two-step pause, for providers that can keep a checkpoint on their host:
   * checkpoints the sandbox to the host's disk (durably), under `target.key`, and releases its
   * compute; returns the level reached. Idempotent. The checkpoint stays until `discardCheckpoint`
   * (or the sandbox's `terminate`); a restore of `key` on this host uses it without the archive.
   */
  checkpointLocally?(ref: SandboxRef, target: LocalCheckpointTarget): Promise<{ level: SnapshotLevel }>;
  /**
   * The second half: packs the checkpoint kept under `target.key` into `target.storage`. Idempotent:
   * an archive already stored is taken as done. Throws `ProviderError` with `details.lost` when
   * neither the kept checkpoint nor a stored archive exists.
   */
  archiveCheckpoint?(agentId: string, target: ArchiveTarget): Promise<CheckpointResult>;
  /** Drops the checkpoint kept on the host under `key`, if any (true then); its archive stays. */
  discardCheckpoint?(agentId: string, key: string): Promise<boolean>;
  /**
   * Calls `onChange` with the agent id whenever one of the provider's sandboxes changes, for
   * providers that can tell (a pod watch); the controller reconciles that agent then.
   */
  watchSandboxes?(onChange: (agentId: string) => void): { stop(): void };
  /** The exec options it honours; the API answers 501 naming any other one asked for. */
  readonly execOptions?: readonly ExecOption[];
  /** Runs an exec with its output streamed as it comes. */
  execStream?(ref: SandboxRef, request: StreamExecRequest): Promise<ExecResult>;
  /** Starts a program on a terminal (a pty). */
  openTerminal?(ref: SandboxRef, request: TerminalRequest): Promise<TerminalHandle>;
  /**
   * Background processes: started by an exec that returns at once, kept by the sandbox (they
   * outlive the request, and a native pause and resume), with the last BACKGROUND_OUTPUT_BYTES
   * of each output stream. The others throw ProcessNotFoundError for an unknown pid.
   */
  startBackground?(ref: SandboxRef, request: BackgroundRequest): Promise<BackgroundProcess>;
  listBackground?(ref: SandboxRef): Promise<BackgroundProcess[]>;
  signalBackground?(ref: SandboxRef, pid: number, signal: ProcessSignal): Promise<BackgroundProcess>;
  /** The process once it ended, or as it is after `timeoutMs`. */
  waitBackground?(ref: SandboxRef, pid: number, timeoutMs: number): Promise<BackgroundProcess>;
  backgroundOutput?(ref: SandboxRef, pid: number): Promise<BackgroundOutput>;
  /** Its output pushed as it comes, until it ends or `stop` (ADR 50). */
  followBackground?(ref: SandboxRef, pid: number, request: BackgroundFollowRequest): Promise<BackgroundFollow>;
  /**
   * Input for a process started with `keepStdin` (an empty `data` writes nothing). Throws ApiError
   * `conflict` when its stdin is closed (never kept, closed, or the process ended), `rate_limited`
   * when the process left too much of its input unread.
   */
  writeBackgroundInput?(ref: SandboxRef, pid: number, data: Buffer): Promise<void>;
  /** Closes the stdin of a process started with `keepStdin` (it reads its end), after what was written. */
  closeBackgroundInput?(ref: SandboxRef, pid: number): Promise<void>;
  /** Replaces the running sandbox's egress policy; it holds for the connections opened from then on. */
  setEgress?(ref: SandboxRef, egress: SandboxEgress): Promise<void>;
  /** The sandbox's files (ADR 40); the API answers 501 naming `files` without them. */
  readonly files?: SandboxFiles;
  /**
   * A TCP connection to `port` on the sandbox's loopback (ADR 40), made from inside the sandbox (it
   * has no network): its bytes both ways. Throws PortClosedError when nothing listens there.
   */
  openPort?(ref: SandboxRef, port: number): Promise<Duplex>;
  /**
   * Warm pools (ADR 45): starts a sandbox for no agent yet, with an empty environment and
   * workspace. Idempotent on `request.id`: one already running is adopted.
   */
  startWarm?(request: WarmSandboxRequest): Promise<SandboxRef>;
  /**
   * Hands the warm sandbox `warm` to the agent of `request`: from now on the agent's id names it
   * too (its files, checkpoints, `terminate` of the agent's id), and its programs get
   * `request.env` (the agent's secrets) from the launcher, which never had them before. Returns
   * the agent's ref of it. Idempotent.
   */
  claimWarm?(warm: SandboxRef, request: ProvisionRequest): Promise<SandboxRef>;
}

/** A sandbox a warm pool starts ahead of its agent (ADR 45): no agent, no secrets, an empty workspace. */
export interface WarmSandboxRequest {
  /** The sandbox's own id (`wsb_…`), also its name on the provider until an agent claims it. */
  id: string;
  compute: Compute;
  browser: boolean;
}

export interface UnsupportedField {
  field: 'storage' | 'browser' | 'gpu' | 'compute' | 'egress';
  message: string;
}

/** Which requested field a provider cannot serve, in words the user can act on; undefined when it can. */
export function unsupportedReason(
  provider: Pick<SandboxProvider, 'name' | 'capabilities'>,
  request: Pick<ProvisionRequest, 'compute' | 'browser' | 'gpu' | 'storage'> & { egress?: { hosts: readonly string[]; cidrs: readonly string[] } | undefined },
): UnsupportedField | undefined {
  const caps = provider.capabilities;
  // Without the capability the sandbox's network is the install's (the chart's NetworkPolicy), whatever the policy says.
  if (request.egress && !caps.egress) {
    return {
      field: 'egress',
      message: `provider "${provider.name}" does not enforce egress policies yet (its sandboxes' network is set by the install); remove "egress" or use the local provider`,
    };
  }
  if (request.storage !== undefined && !caps.storage) {
    return {
      field: 'storage',
      message: `storage attachments are not supported by provider "${provider.name}" (no current provider supports them); remove "storage"`,
    };
  }
  if (request.browser && !caps.browser) {
    return {
      field: 'browser',
      message: `provider "${provider.name}" has no browser-capable sandbox template configured; remove "browser" or have the operator of this install configure a browser image`,
    };
  }
  if (request.gpu !== undefined && !caps.gpuTypes.includes(request.gpu)) {
    return {
      field: 'gpu',
      message:
        caps.gpuTypes.length === 0
          ? `provider "${provider.name}" has no GPUs; remove "gpu" or choose a provider with GPU nodes`
          : `provider "${provider.name}" has no GPU type "${request.gpu}"; it has ${caps.gpuTypes.join(', ')}`,
    };
  }
  if (!caps.computes.includes(request.compute)) {
    return {
      field: 'compute',
      message: `provider "${provider.name}" cannot run compute "${request.compute}" (it runs ${caps.computes.join(', ')})`,
    };
  }
  return undefined;
}

/** The provider refused or failed; the API answers 502 `provider_error`. */
export class ProviderError extends Error {
  constructor(
    readonly provider: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

/** The request asks for something the provider cannot do; retrying will not help. */
export class UnsupportedRequestError extends ProviderError {
  override name = 'UnsupportedRequestError';
}

/** The sandbox is on its way (an image being built, say): ask again later; nothing failed. */
export class SandboxNotReadyError extends ProviderError {
  override name = 'SandboxNotReadyError';
  constructor(provider: string, message: string, readonly retryAfterMs = 2_000) {
    super(provider, message);
  }
}

export class ExecTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`exec exceeded its ${timeoutMs / 1000}s limit and was killed`);
    this.name = 'ExecTimeoutError';
  }
}
