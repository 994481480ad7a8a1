import { createHash } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { PassThrough, type Duplex } from 'node:stream';
import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { startInformer, type ResilientInformer } from '@berth/common/kubernetes';
import type { SandboxRef } from '@berth/crds';
import {
  ApiError,
  ArchiveIntegrityError,
  EXEC_OPTIONS,
  ExecTimeoutError,
  ProviderError,
  SandboxNotReadyError,
  UnsupportedRequestError,
  detectCompression,
  idToObjectName,
  isId,
  objectNameToId,
  unsupportedReason,
  egressAllowsAnything,
  type SandboxEgress,
  storedArchiveOf,
  verifyArchive,
  type ArchiveCompression,
  type ExecRequest,
  type ExecResult,
  type Logger,
  type StreamExecRequest,
  type SandboxFiles,
  type CheckpointResult,
  type CheckpointTarget,
  type ProviderCapabilities,
  type RestoreSource,
  type ProvisionRequest,
  type SandboxProvider,
  type SandboxState,
  type StoredArchive,
  type BackgroundFollow,
  type BackgroundFollowRequest,
  type BackgroundOutput,
  type BackgroundProcess,
  type BackgroundRequest,
  type ProcessSignal,
  type TerminalHandle,
  type TerminalRequest,
  type WarmSandboxRequest,
} from '@berth/common';
import { z } from 'zod';
import { INTERPRETERS } from '../program.js';
import { guestSource } from '../guest.js';
import { Connection, backgroundOutput, controlFailure, backgroundProcess, backgroundProcessSchema } from '../local/channel.js';
import { launcherWatch } from '../local/files.js';
import { guestConfigMap, openPodLauncher, type PodLauncherLink } from './launcher.js';
import { CANCEL_SCRIPT, EXEC_SCRIPT, execNonce, execStdin, takeTimeoutLine, timeoutLineBytes } from './exec-script.js';
import { execInPod, streamInPod } from './exec.js';
import { NodeAgentClient, NodeAgentRefusal, readArchiveManifest, type NodeAgentSettings } from './node-agent.js';
import { podFiles, podTunnel } from './files.js';
import {
  EGRESS_GATEWAY,
  NATIVE_RESTORE_GATE,
  RestoreAnnotations,
  SANDBOX_CONTAINER,
  SandboxLabels,
  adoptionPatch,
  desiredPod,
  desiredWarmPod,
  podNameOf,
  type PodSettings,
} from './pod.js';
import { egressCaSecret, egressCaSecretName, serviceOfGatewayHost } from './egress.js';
import { createCertificateAuthority } from '../local/egress/certificates.js';
import { parseAuthority } from '../local/egress/proxy.js';

/** The three steps of a workspace restore, in the pod (see restoreWorkspace). */
const RESTORE_SCRATCH = '.berth-restore';
/** Extracting needs the archive's compression named; a zstd one (from the local provider) needs zstd in the image. */
const restoreExtract = (compression: ArchiveCompression | undefined) => `set -e
cd "\${BERTH_WORKSPACE:-/workspace}"
rm -rf ${RESTORE_SCRATCH} && mkdir ${RESTORE_SCRATCH}
tar -x ${compression ? `--${compression}` : ''} -f - -C ${RESTORE_SCRATCH}`;
// Each top-level entry is copied, never the directory itself: /workspace is the pod's emptyDir,
// owned by root, and the sandbox user may not set its times (\`cp -a dir/. .\` fails on '.').
const RESTORE_COMMIT = `set -e
cd "\${BERTH_WORKSPACE:-/workspace}"
if [ -d ${RESTORE_SCRATCH}/workspace ]; then find ${RESTORE_SCRATCH}/workspace -mindepth 1 -maxdepth 1 -exec cp -a -t . -- {} +; fi
rm -rf ${RESTORE_SCRATCH}`;
const RESTORE_ABORT = `cd "\${BERTH_WORKSPACE:-/workspace}" && rm -rf ${RESTORE_SCRATCH}`;

/** What the launcher answers a request about background processes within (a WAIT: its own time more). */
const CONTROL_WAIT_MS = 10_000;
/** How long a resolved egress gateway address is used before it is resolved again. */
const GATEWAY_ADDRESS_TTL_MS = 60_000;

/** As the local provider's: unbuffered Python, no bytecode beside the program, the workspace importable. */
const EXEC_ENV = { PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1', PYTHONPATH: '/workspace' };

/** The argv and stdin with which the launcher runs an exec's program in a pod (pod-program.sh). */
function podProgram(request: Pick<ExecRequest, 'language' | 'code' | 'stdin'>): { argv: string[]; stdin: Buffer } {
  const interpreter = INTERPRETERS[request.language];
  const code = Buffer.from(request.code, 'utf8');
  return {
    argv: ['sh', '-c', guestSource('pod-program.sh'), 'berth-program', interpreter.extension, String(code.length), ...interpreter.argv],
    stdin: Buffer.concat([code, request.stdin ?? Buffer.alloc(0)]),
  };
}

/** Restored pods carry this annotation, so that a reconcile does not restore them twice. */
const RESTORED_ANNOTATION = 'berth.dev/restored-from';

function isApiError(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

export interface KubernetesProviderOptions {
  kubeConfig: KubeConfig;
  pods: PodSettings;
  /** Namespace of the Agent resources. */
  resourceNamespace: string;
  log: Logger;
  maxOutputBytes?: number;
  /** Node agents (`berth node`) on the nodes: pauses and resumes keep processes and memory where one answers (ADR 38). */
  nodeAgents?: NodeAgentSettings | undefined;
  /**
   * The egress gateway (`host:port`, ADR 52) the pods of agents with an egress policy use as their
   * proxy; with it the provider enforces egress policies. The host is made an address when a pod is
   * made (a Service's name its ClusterIP), so that the pod needs no DNS.
   */
  egressGateway?: string | undefined;
}

/** Sandboxes as pods: one per agent, named after it, exec'd into through the API server. */
export class KubernetesProvider implements SandboxProvider {
  readonly name = 'kubernetes';
  readonly capabilities: ProviderCapabilities;
  /** env, cwd and stdin go to the exec script on its stdin (exec-script.ts). */
  readonly execOptions = EXEC_OPTIONS;
  /** The pod's files, over the exec API (files.ts). */
  readonly files: SandboxFiles;
  private readonly core: CoreV1Api;
  private pods: ResilientInformer<V1Pod> | undefined;
  private readonly nodeAgents: NodeAgentClient | undefined;
  /** The guest ConfigMap known to exist (ensureGuestConfigMap). */
  private guestConfigMapReady: string | undefined;
  /** The egress gateway's address as last resolved, and until when it is used (gatewayAddress). */
  private gatewayResolved: { address: string; until: number } | undefined;

  constructor(private readonly options: KubernetesProviderOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.nodeAgents = options.nodeAgents?.token ? new NodeAgentClient(options.nodeAgents) : undefined;
    this.files = {
      ...podFiles(this.name, options.kubeConfig, (ref) => this.podTarget(ref)),
      // A watch is the pod launcher's (ADR 51), over a connection of its own, closed with it.
      watch: async (ref, path, options) => {
        const connection = await this.requireLauncher(ref, 'files.watch');
        try {
          return await launcherWatch(this.name, connection, ref, path, options, () => connection.close());
        } catch (error) {
          connection.close();
          throw error;
        }
      },
    };
    this.capabilities = {
      computes: ['python', 'node', 'go'],
      browser: options.pods.browserImage !== undefined,
      gpuTypes: Object.keys(options.pods.gpuTable),
      storage: false,
      checkpoint: options.nodeAgents ? 'native' : 'filesystem',
      egress: options.egressGateway !== undefined,
    };
  }

  private get namespace(): string {
    return this.options.pods.namespace;
  }

  /**
   * The pod from the watch's cache once the operator watches pods (every reconcile reads it;
   * the API server need not answer each time), from the API server otherwise. A pod just created
   * and not yet in the cache reads as missing: creating it again answers 409, which waits.
   */
  private async readPod(name: string): Promise<V1Pod | undefined> {
    if (this.pods?.isSynced()) return this.pods.cache.get(name, this.namespace);
    try {
      return await this.core.readNamespacedPod({ name, namespace: this.namespace });
    } catch (error) {
      if (isApiError(error, 404)) return undefined;
      throw new ProviderError(this.name, `reading pod ${name}: ${(error as Error).message}`);
    }
  }

  async provision(request: ProvisionRequest): Promise<SandboxRef> {
    const unsupported = unsupportedReason(this, request);
    if (unsupported) throw new UnsupportedRequestError(this.name, `${unsupported.field}: ${unsupported.message}`);
    const name = idToObjectName(request.agentId);
    const ref: SandboxRef = { provider: this.name, id: request.agentId, details: { namespace: this.namespace, pod: name } };
    const existing = await this.readPod(name);
    const state = existing ? podState(existing) : 'missing';
    if (state === 'running') {
      const restore = request.restore;
      const annotations = existing!.metadata?.annotations ?? {};
      if (restore && annotations[RESTORED_ANNOTATION] !== restore.key) {
        if (annotations[RestoreAnnotations.key] === restore.key && annotations[RestoreAnnotations.level] === 'native') {
          // runsc restored the pod from the staged checkpoint: processes, memory and files are back.
          await this.unstage(annotations[RestoreAnnotations.node], existing!.metadata!.uid!);
        } else {
          await this.restoreWorkspace(name, restore);
        }
        await this.annotate(name, { [RESTORED_ANNOTATION]: restore.key });
      }
      return ref;
    }
    if (state === 'pending') {
      if (existing!.spec?.schedulingGates?.some((gate) => gate.name === NATIVE_RESTORE_GATE) && request.restore) {
        // Created for a native restore by a reconcile that did not get to stage it.
        await this.stageAndRelease(existing!, request.restore);
      }
      throw new SandboxNotReadyError(this.name, `pod ${name} is ${describePending(existing!)}`, 1_000);
    }
    // A pod restored natively from this snapshot that ended without running (runsc refused the
    // checkpoint): its successor restores the files only, rather than fail the same way again.
    const annotations = existing?.metadata?.annotations ?? {};
    const nativeFailed = annotations[RestoreAnnotations.level] === 'native' && annotations[RestoreAnnotations.key] === request.restore?.key;
    if (nativeFailed) this.options.log.warn({ pod: name, status: describePending(existing!) }, 'the native restore did not start; restoring the files only');
    if (existing) await this.deletePod(name); // a pod that ended: start over with a new one
    const restoreNode = request.restore && !nativeFailed ? await this.nativeRestoreNode(request.restore) : undefined;
    const envSecret = Object.keys(request.env).length > 0 ? await this.writeEnvSecret(name, request) : undefined;
    const egress = request.egress ? await this.egressOf(name, request) : undefined;
    const pod = desiredPod(
      {
        name,
        sessionName: idToObjectName(request.sessionId),
        compute: request.compute,
        browser: request.browser,
        gpu: request.gpu,
        timeoutSeconds: request.timeoutSeconds,
        envSecret,
        egress,
        guestConfigMap: await this.ensureGuestConfigMap(),
        nativeRestore: restoreNode && request.restore ? { node: restoreNode, key: request.restore.key } : undefined,
        owner: this.ownerOf(request),
      },
      this.options.pods,
    );
    const created = await this.createPod(name, pod);
    if (created && restoreNode && request.restore) await this.stageAndRelease(created, request.restore);
    throw new SandboxNotReadyError(this.name, `pod ${name} created; waiting for it to run`, 1_000);
  }

  /**
   * Creates the pod; undefined when one of its name exists already (created by a reconcile that
   * lost its status write, or deleted a moment ago and still terminating).
   */
  private async createPod(name: string, body: V1Pod): Promise<V1Pod | undefined> {
    try {
      return await this.core.createNamespacedPod({ namespace: this.namespace, body });
    } catch (error) {
      if (!isApiError(error, 409)) throw new ProviderError(this.name, `creating pod ${name}: ${(error as Error).message}`);
      return undefined;
    }
  }

  /**
   * A warm pool's pod (ADR 53): an agent's pod with no agent yet, named after the warm sandbox's
   * id, without secrets, deadline or owner; its launcher is its main process. Idempotent on the
   * id: a running pod of that name is adopted, one that ended is replaced. Throws
   * SandboxNotReadyError until the pod runs (the pool's reconciler asks again).
   */
  async startWarm(request: WarmSandboxRequest): Promise<SandboxRef> {
    const unsupported = unsupportedReason(this, request);
    if (unsupported) throw new UnsupportedRequestError(this.name, `${unsupported.field}: ${unsupported.message}`);
    const name = idToObjectName(request.id);
    const existing = await this.readPod(name);
    const state = existing ? podState(existing) : 'missing';
    if (state === 'running') return { provider: this.name, id: request.id, details: { namespace: this.namespace, pod: name } };
    if (state === 'pending') throw new SandboxNotReadyError(this.name, `pod ${name} is ${describePending(existing!)}`, 1_000);
    if (existing) await this.deletePod(name);
    await this.createPod(name, desiredWarmPod({ name, compute: request.compute, browser: request.browser, guestConfigMap: await this.ensureGuestConfigMap() }, this.options.pods));
    throw new SandboxNotReadyError(this.name, `pod ${name} created; waiting for it to run`, 1_000);
  }

  /**
   * The agent adopts the warm pod (ADR 53). Its environment (its secrets) goes to the pod's launcher,
   * which gives it to every program it starts from then on, in its memory only: the pod spec never
   * holds it. Then the pod takes the agent's labels, owner and deadline (adoptionPatch). The pod
   * keeps its name, which the returned ref carries (`details.pod`) for every later operation.
   * Idempotent: both steps may run again.
   */
  async claimWarm(warm: SandboxRef, request: ProvisionRequest): Promise<SandboxRef> {
    const name = podNameOf(warm);
    const pod = await this.readPod(name);
    if (!pod || podState(pod) !== 'running') throw new ProviderError(this.name, `warm pod ${name} is ${pod ? podState(pod) : 'gone'}`, { sandbox: warm.id });
    const ref: SandboxRef = { provider: this.name, id: request.agentId, details: { namespace: this.namespace, pod: name } };
    // Adopted already (the patch comes after the environment): a reconcile that ran again.
    if (pod.metadata?.labels?.[SandboxLabels.agent] === idToObjectName(request.agentId)) return ref;
    if (Object.keys(request.env).length > 0) await this.setLauncherEnvironment(warm, request.env);
    const patch = adoptionPatch(
      pod,
      { agentName: idToObjectName(request.agentId), sessionName: idToObjectName(request.sessionId), warmId: warm.id, timeoutSeconds: request.timeoutSeconds, owner: this.ownerOf(request) },
      new Date(),
    );
    try {
      await this.core.patchNamespacedPod({ name, namespace: this.namespace, body: patch }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    } catch (error) {
      throw new ProviderError(this.name, `adopting pod ${name}: ${(error as Error).message}`, { sandbox: warm.id });
    }
    return ref;
  }

  /**
   * Sets the launcher's base environment. A warm pod claimed right after its container started may
   * not have its channel listening yet (the relay client then finds none): asked again for a while.
   */
  private async setLauncherEnvironment(ref: SandboxRef, env: Record<string, string>): Promise<void> {
    const deadline = Date.now() + CONTROL_WAIT_MS;
    for (;;) {
      const link = await this.launcherOf(ref);
      try {
        if (await this.launcherAnswered(ref, link)) {
          await link.connection.control({ op: 'environment', env }, CONTROL_WAIT_MS);
          return;
        }
      } catch (error) {
        if (error instanceof ProviderError) throw error;
        throw new ProviderError(this.name, `giving the agent's environment to the launcher of pod ${podNameOf(ref)}: ${(error as Error).message}`, { sandbox: ref.id });
      } finally {
        link.connection.close();
      }
      if (Date.now() >= deadline) throw new ProviderError(this.name, `pod ${podNameOf(ref)} has no launcher answering: the agent's environment cannot reach it`, { sandbox: ref.id });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  async state(ref: SandboxRef): Promise<SandboxState> {
    const pod = await this.readPod(podNameOf(ref));
    return pod ? podState(pod) : 'missing';
  }

  async exec(ref: SandboxRef, request: ExecRequest): Promise<ExecResult> {
    return this.runExec(ref, request);
  }

  /**
   * The exec with its output given to `onOutput` as the exec API brings it. The last bytes of
   * stderr are held back until the end (they may be the script's timeout line, which is not the
   * program's); `signal` ends the program (a second exec sends TERM to its `timeout`).
   */
  async execStream(ref: SandboxRef, request: StreamExecRequest): Promise<ExecResult> {
    return this.runExec(ref, request, request.onOutput, request.signal);
  }

  private async runExec(ref: SandboxRef, request: ExecRequest, onOutput?: StreamExecRequest['onOutput'], signal?: AbortSignal): Promise<ExecResult> {
    const link = await this.launcherOf(ref);
    try {
      // Sent at once, before the launcher's HELLO: a pod without a launcher never runs it.
      const overLauncher = this.execViaLauncher(ref, link.connection, request, onOutput, signal);
      overLauncher.catch(() => undefined);
      if (!(await this.launcherAnswered(ref, link))) return await this.execScript(ref, request, onOutput, signal);
      return await overLauncher;
    } finally {
      link.connection.close();
    }
  }

  /** The program as a child of the pod's launcher (ADR 47): inside a native checkpoint with everything it started. */
  private async execViaLauncher(
    ref: SandboxRef,
    connection: Connection,
    request: ExecRequest,
    onOutput?: StreamExecRequest['onOutput'],
    signal?: AbortSignal,
  ): Promise<ExecResult> {
    const program = podProgram(request);
    const result = await connection.exec({
      argv: program.argv,
      env: { ...EXEC_ENV, ...request.env },
      cwd: request.cwd ?? '/workspace',
      limitMs: request.timeoutMs,
      maxOutputBytes: this.options.maxOutputBytes ?? 1024 * 1024,
      // The launcher's limit ends the program first; this one covers a pod that stops answering.
      timeoutMs: request.timeoutMs + 10_000,
      stdin: program.stdin,
      ...(onOutput ? { onOutput } : {}),
      ...(signal ? { signal } : {}),
    });
    if (result.kind === 'timedOut') throw new ExecTimeoutError(request.timeoutMs);
    if (result.kind === 'lost') throw new ProviderError(this.name, `exec in pod ${podNameOf(ref)}: the connection to its launcher ended during the exec`, { sandbox: ref.id });
    const { outcome } = result;
    if (outcome.outcome === 'timedOut') throw new ExecTimeoutError(request.timeoutMs);
    if (outcome.outcome === 'failed') throw new ProviderError(this.name, `exec in pod ${podNameOf(ref)}: ${outcome.error}`, { sandbox: ref.id });
    return { stdout: result.stdout, stderr: result.stderr, exitCode: outcome.exitCode, durationMs: result.durationMs };
  }

  /** A connection to the pod's launcher (launcher.ts), open at once. */
  private async launcherOf(ref: SandboxRef): Promise<PodLauncherLink> {
    try {
      return await openPodLauncher(this.options.kubeConfig, this.podTarget(ref), this.options.log);
    } catch (error) {
      throw new ProviderError(this.name, `reaching the launcher of pod ${podNameOf(ref)}: ${(error as Error).message}`, { sandbox: ref.id });
    }
  }

  /**
   * Whether the pod has a launcher: false for a pod started without one (by an older Berth), whose
   * execs run as children of the exec instead (execScript).
   */
  private async launcherAnswered(ref: SandboxRef, link: PodLauncherLink): Promise<boolean> {
    try {
      return await link.ready;
    } catch (error) {
      throw new ProviderError(this.name, `reaching the launcher of pod ${podNameOf(ref)}: ${(error as Error).message}`, { sandbox: ref.id });
    }
  }

  /** As launcherOf, for what only the launcher can do (background processes, terminals). */
  private async requireLauncher(ref: SandboxRef, field: 'background' | 'pty' | 'files.watch'): Promise<Connection> {
    const link = await this.launcherOf(ref);
    const answered = await this.launcherAnswered(ref, link).catch((error: unknown) => {
      link.connection.close();
      throw error;
    });
    if (!answered) {
      throw new ApiError('not_implemented', `${field}: this sandbox pod was started without the launcher (by an older Berth): terminate the agent and create it again`, {
        field,
        provider: this.name,
      });
    }
    return link.connection;
  }

  /** The guest programs' ConfigMap in the sandbox namespace, created once (it is immutable, named by their hash). */
  private async ensureGuestConfigMap(): Promise<string> {
    const configMap = guestConfigMap(this.namespace);
    const name = configMap.metadata!.name!;
    if (this.guestConfigMapReady === name) return name;
    try {
      await this.core.createNamespacedConfigMap({ namespace: this.namespace, body: configMap });
    } catch (error) {
      if (!isApiError(error, 409)) throw new ProviderError(this.name, `creating ConfigMap ${name}: ${(error as Error).message}`);
    }
    this.guestConfigMapReady = name;
    return name;
  }

  async openTerminal(ref: SandboxRef, request: TerminalRequest): Promise<TerminalHandle> {
    const connection = await this.requireLauncher(ref, 'pty');
    const session = connection.terminal(
      {
        argv: request.argv,
        env: { ...EXEC_ENV, ...request.env },
        cwd: request.cwd ?? '/workspace',
        limitMs: request.timeoutMs,
        maxOutputBytes: Number.MAX_SAFE_INTEGER,
        timeoutMs: request.timeoutMs + 10_000,
        onOutput: (_stream, chunk) => request.onOutput(chunk),
      },
      { rows: request.rows, cols: request.cols },
    );
    const done = session.done.then((result) => {
      if (result.kind !== 'ended') return { exitCode: 128 + 9, signal: 9 };
      const { outcome } = result;
      if (outcome.outcome === 'failed') throw new ProviderError(this.name, outcome.error, { sandbox: ref.id });
      return { exitCode: outcome.exitCode, ...('signal' in outcome ? { signal: outcome.signal } : {}) };
    });
    void done.finally(() => connection.close()).catch(() => undefined);
    return { write: (data) => session.write(data), resize: (rows, cols) => session.resize(rows, cols), close: () => session.cancel(), done };
  }

  /** A background process of the pod's launcher: it outlives the exec that started it, and a native checkpoint. */
  async startBackground(ref: SandboxRef, request: BackgroundRequest): Promise<BackgroundProcess> {
    const program = podProgram(request);
    const record = await this.control(ref, (connection) =>
      connection.background(
        {
          argv: program.argv,
          env: { ...EXEC_ENV, ...request.env },
          cwd: request.cwd ?? '/workspace',
          limitMs: request.timeoutMs,
          maxOutputBytes: 0,
          stdin: program.stdin,
          ...(request.keepStdin ? { keepStdin: true } : {}),
        },
        CONTROL_WAIT_MS,
      ),
    );
    return backgroundProcess(record);
  }

  async listBackground(ref: SandboxRef): Promise<BackgroundProcess[]> {
    const answer = await this.control(ref, (connection) => connection.control({ op: 'list' }, CONTROL_WAIT_MS));
    return z.object({ processes: z.array(backgroundProcessSchema) }).parse(answer).processes.map(backgroundProcess);
  }

  async signalBackground(ref: SandboxRef, pid: number, signal: ProcessSignal): Promise<BackgroundProcess> {
    const answer = await this.control(ref, (connection) => connection.control({ op: 'signal', pid, signal }, CONTROL_WAIT_MS), pid);
    return backgroundProcess(backgroundProcessSchema.parse(answer));
  }

  async waitBackground(ref: SandboxRef, pid: number, timeoutMs: number): Promise<BackgroundProcess> {
    const answer = await this.control(ref, (connection) => connection.control({ op: 'wait', pid, timeoutMs }, timeoutMs + CONTROL_WAIT_MS), pid);
    return backgroundProcess(backgroundProcessSchema.parse(answer));
  }

  async backgroundOutput(ref: SandboxRef, pid: number): Promise<BackgroundOutput> {
    return backgroundOutput(await this.control(ref, (connection) => connection.control({ op: 'output', pid }, CONTROL_WAIT_MS), pid));
  }

  /** A follow holds a connection (an exec of pod-channel-client) of its own until the process ends or the follow stops. */
  async followBackground(ref: SandboxRef, pid: number, request: BackgroundFollowRequest): Promise<BackgroundFollow> {
    const connection = await this.requireLauncher(ref, 'background');
    try {
      const follow = await connection.follow(pid, request, CONTROL_WAIT_MS);
      void follow.ended.finally(() => connection.close()).catch(() => undefined);
      return follow;
    } catch (error) {
      connection.close();
      throw controlFailure(this.name, ref, error, pid);
    }
  }

  async writeBackgroundInput(ref: SandboxRef, pid: number, data: Buffer): Promise<void> {
    await this.control(ref, (connection) => connection.backgroundInput(pid, data, CONTROL_WAIT_MS), pid);
  }

  async closeBackgroundInput(ref: SandboxRef, pid: number): Promise<void> {
    await this.control(ref, (connection) => connection.closeBackgroundInput(pid, CONTROL_WAIT_MS), pid);
  }

  /** One request to the launcher on a connection of its own, its failures in the provider's terms. */
  private async control<T>(ref: SandboxRef, ask: (connection: Connection) => Promise<T>, pid?: number): Promise<T> {
    const connection = await this.requireLauncher(ref, 'background');
    try {
      return await ask(connection);
    } catch (error) {
      throw controlFailure(this.name, ref, error, pid);
    } finally {
      connection.close();
    }
  }

  /** A pod without the launcher: the program as a child of the exec, under the exec script (exec-script.ts). */
  private async execScript(ref: SandboxRef, request: ExecRequest, onOutput?: StreamExecRequest['onOutput'], signal?: AbortSignal): Promise<ExecResult> {
    const interpreter = INTERPRETERS[request.language];
    const nonce = execNonce();
    const limitSeconds = String(Math.max(1, Math.ceil(request.timeoutMs / 1000)));
    const target = this.podTarget(ref);
    let heldBack = Buffer.alloc(0);
    const hold = timeoutLineBytes(nonce);
    const forward =
      onOutput &&
      ((stream: 'stdout' | 'stderr', chunk: Buffer) => {
        if (stream === 'stdout') return onOutput('stdout', chunk);
        heldBack = Buffer.concat([heldBack, chunk]);
        if (heldBack.length > hold) {
          onOutput('stderr', heldBack.subarray(0, heldBack.length - hold));
          heldBack = heldBack.subarray(heldBack.length - hold);
        }
      });
    const cancel = () => {
      void execInPod(this.options.kubeConfig, target, ['sh', '-c', CANCEL_SCRIPT, 'berth-cancel', nonce], { stdin: '', timeoutMs: 10_000, maxOutputBytes: 4096 }).catch(
        (error: unknown) => this.options.log.warn({ err: error, sandbox: ref.id }, 'could not end a streamed exec whose client went away'),
      );
    };
    signal?.addEventListener('abort', cancel, { once: true });
    let result;
    try {
      result = await execInPod(
        this.options.kubeConfig,
        target,
        ['sh', '-c', EXEC_SCRIPT, 'berth-exec', interpreter.extension, limitSeconds, ...interpreter.argv],
        {
          stdin: execStdin(nonce, request.code, {
            ...(request.env !== undefined ? { env: request.env } : {}),
            ...(request.cwd !== undefined ? { cwd: request.cwd } : {}),
            ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
          }),
          timeoutMs: request.timeoutMs + 10_000,
          maxOutputBytes: this.options.maxOutputBytes ?? 1024 * 1024,
          ...(forward ? { onOutput: forward } : {}),
        },
      );
    } catch (error) {
      throw new ProviderError(this.name, `exec in pod ${podNameOf(ref)}: ${(error as Error).message}`, { sandbox: ref.id });
    } finally {
      signal?.removeEventListener('abort', cancel);
    }
    const stderr = takeTimeoutLine(result.stderr, result.stderrTail, nonce);
    if (onOutput && heldBack.length > 0) {
      const rest = takeTimeoutLine(heldBack.toString('latin1'), heldBack.toString('latin1'), nonce).stderr;
      if (rest.length > 0) onOutput('stderr', Buffer.from(rest, 'latin1'));
    }
    if (result.timedOut || stderr.timedOut) {
      throw new ExecTimeoutError(request.timeoutMs);
    }
    return { stdout: result.stdout, stderr: stderr.stderr, exitCode: result.exitCode, durationMs: result.durationMs };
  }

  /** A TCP connection to `port` on the pod's loopback, relayed by an exec (the pod needs no Service or network policy for it). */
  openPort(ref: SandboxRef, port: number): Promise<Duplex> {
    return podTunnel(this.name, this.options.kubeConfig, this.podTarget(ref), ref, port);
  }

  async terminate(ref: SandboxRef): Promise<void> {
    await this.deletePod(podNameOf(ref));
    // A ref the operator did not record (a claim whose status write was lost) names the agent
    // alone: a warm pod it adopted carries its label.
    if (ref.details?.pod === undefined && isId(ref.id, 'agt')) {
      const labelSelector = `${SandboxLabels.agent}=${idToObjectName(ref.id)}`;
      let adopted: V1Pod[];
      try {
        adopted = (await this.core.listNamespacedPod({ namespace: this.namespace, labelSelector })).items;
      } catch (error) {
        throw new ProviderError(this.name, `listing the pods of agent ${ref.id}: ${(error as Error).message}`);
      }
      for (const pod of adopted) await this.deletePod(pod.metadata!.name!);
    }
    // Kept by a pause (checkpoint), so that the resumed pod trusts the same CA; gone with the sandbox.
    // Named after the agent (its pod is never a warm one: agents with a policy start cold).
    await this.deleteSecret(egressCaSecretName(idToObjectName(ref.id)));
  }

  /**
   * Filesystem level: the pod's /workspace as a gzipped tar (entries under `workspace/`, the
   * layout every provider reads) streamed out over exec into storage, then the pod deleted.
   * With node agents configured and one answering on the pod's node, the checkpoint is native
   * instead (processes and memory, ADR 38); without, or when the snapshot asks for files only, this.
   */
  async checkpoint(ref: SandboxRef, target: CheckpointTarget): Promise<CheckpointResult> {
    if (await target.storage.exists(target.key)) {
      // A checkpoint that stored its archive and then crashed before deleting the pod.
      await this.deletePod(podNameOf(ref));
      const manifest = await readArchiveManifest(await target.storage.get(target.key));
      return { ...(await describeStored(target)), level: manifest?.level === 'native' ? 'native' : 'filesystem' };
    }
    if (target.native && this.nodeAgents) {
      const native = await this.checkpointNatively(ref, target);
      if (native) return native;
    }
    const body = new PassThrough();
    const stored = target.storage.put(target.key, body);
    const run = streamInPod(
      this.options.kubeConfig,
      this.podTarget(ref),
      ['sh', '-c', 'cd "${BERTH_WORKSPACE:-/workspace}" && tar -czf - --transform "s,^\\.,workspace," .'],
      { stdout: body, timeoutMs: 30 * 60_000 },
    );
    let result: Awaited<typeof run>;
    try {
      result = await run;
    } catch (error) {
      body.destroy(error as Error);
      await stored.catch(() => undefined);
      throw new ProviderError(this.name, `archiving the workspace of pod ${podNameOf(ref)}: ${(error as Error).message}`);
    }
    if (result.exitCode !== 0) {
      body.destroy(new Error(result.stderr));
      await stored.catch(() => undefined);
      await target.storage.delete(target.key);
      throw new ProviderError(this.name, `archiving the workspace failed (exit ${result.exitCode}): ${result.stderr.trim()}`);
    }
    const archive = await stored;
    await this.deletePod(podNameOf(ref));
    return { ...archive, level: 'filesystem' };
  }

  /** The InternalIP of a node, where its node agent listens. */
  private async nodeAddress(node: string): Promise<string | undefined> {
    try {
      const read = await this.core.readNode({ name: node });
      return read.status?.addresses?.find((address) => address.type === 'InternalIP')?.address;
    } catch (error) {
      if (isApiError(error, 404)) return undefined;
      throw new ProviderError(this.name, `reading node ${node}: ${(error as Error).message}`);
    }
  }

  /** The node agent of `node`, if one answers there. */
  private async nodeAgentOn(node: string | undefined): Promise<{ address: string; runscVersion: string } | undefined> {
    if (!this.nodeAgents || !node) return undefined;
    const address = await this.nodeAddress(node);
    if (!address) return undefined;
    const info = await this.nodeAgents.info(address).catch((error: Error) => {
      this.options.log.warn({ node, err: error.message }, 'no node agent answers on the node');
      return undefined;
    });
    return info ? { address, runscVersion: info.runscVersion } : undefined;
  }

  /**
   * Memory and processes too: the node agent on the pod's node checkpoints its gVisor sandbox and
   * streams the archive (manifest, workspace, runsc's image) into storage; then the pod goes.
   * Undefined when no node agent answers there: the caller archives the files instead.
   */
  private async checkpointNatively(ref: SandboxRef, target: CheckpointTarget): Promise<CheckpointResult | undefined> {
    const name = podNameOf(ref);
    const pod = await this.readPod(name);
    const agent = await this.nodeAgentOn(pod?.spec?.nodeName);
    if (!pod?.metadata?.uid || !agent) {
      this.options.log.info({ pod: name, node: pod?.spec?.nodeName }, 'pausing at filesystem level: no node agent on the pod\'s node');
      return undefined;
    }
    let archive: StoredArchive;
    try {
      const stream = await this.nodeAgents!.checkpoint(agent.address, pod.metadata.uid);
      archive = await target.storage.put(target.key, stream);
    } catch (error) {
      if (error instanceof NodeAgentRefusal && error.status === 404) {
        // The sandbox is not on that node any more (not running): nothing was stopped.
        this.options.log.warn({ pod: name, err: error.message }, 'pausing at filesystem level: the node agent found no running sandbox');
        return undefined;
      }
      await target.storage.delete(target.key).catch(() => undefined);
      throw new ProviderError(this.name, `checkpointing pod ${name} on node ${pod.spec!.nodeName}: ${(error as Error).message}`);
    }
    await this.deletePod(name);
    return { ...archive, level: 'native' };
  }

  /**
   * The node for a native restore of `restore`: the one that made the checkpoint if its agent runs
   * the same runsc, else any node whose agent does. Undefined (a filesystem-level restore) when the
   * archive is not native, not stored yet, or no such node agent answers.
   */
  private async nativeRestoreNode(restore: RestoreSource): Promise<string | undefined> {
    if (restore.level !== 'native' || !this.nodeAgents || !restore.archive) return undefined;
    const manifest = await readArchiveManifest(await restore.storage.get(restore.archive.key));
    if (manifest?.level !== 'native' || !manifest.runscVersion) return undefined;
    const same = async (node: string | undefined) => (await this.nodeAgentOn(node))?.runscVersion === manifest.runscVersion;
    if (manifest.node && (await same(manifest.node))) return manifest.node;
    const nodes = (await this.core.listNode()).items
      .filter((node) => node.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') && !node.spec?.unschedulable)
      .map((node) => node.metadata!.name!)
      .filter((node) => node !== manifest.node);
    for (const node of nodes) if (await same(node)) return node;
    this.options.log.warn({ key: restore.key, runsc: manifest.runscVersion }, 'resuming at filesystem level: no node agent runs the runsc of the checkpoint');
    return undefined;
  }

  /**
   * Streams the archive (its digest checked on the way) to the node agent of the pod's node, which
   * stages it for the pod's UID, then lifts the scheduling gate. If the agent refuses or cannot be
   * reached, the pod is released anyway, marked for a filesystem-level restore. A digest mismatch
   * fails the restore as corrupted.
   */
  private async stageAndRelease(pod: V1Pod, restore: RestoreSource): Promise<void> {
    const name = pod.metadata!.name!;
    const node = pod.metadata?.annotations?.[RestoreAnnotations.node];
    const archive = storedArchiveOf(this.name, restore);
    let level: 'native' | 'filesystem' = 'filesystem';
    const agent = await this.nodeAgentOn(node);
    if (agent) {
      const source = (await restore.storage.get(archive.key)).pipe(verifyArchive(archive.key, archive.sha256));
      const failed = new Promise<Error>((resolve) => source.on('error', resolve));
      try {
        await this.nodeAgents!.stage(agent.address, pod.metadata!.uid!, source);
        level = 'native';
      } catch (error) {
        const cause = await Promise.race([failed, new Promise<undefined>((resolve) => setTimeout(resolve, 10, undefined))]);
        if (cause instanceof ArchiveIntegrityError) throw new ProviderError(this.name, cause.message, { corrupted: true });
        this.options.log.warn({ pod: name, node, err: (error as Error).message }, 'resuming at filesystem level: staging the checkpoint failed');
      }
    }
    await this.core.patchNamespacedPod(
      {
        name,
        namespace: this.namespace,
        body: [
          { op: 'remove', path: '/spec/schedulingGates' },
          { op: 'add', path: `/metadata/annotations/${RestoreAnnotations.level.replace('/', '~1')}`, value: level },
        ],
      },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
  }

  /** Drops the checkpoint staged for a pod that now runs (best effort: the agent prunes stale ones). */
  private async unstage(node: string | undefined, podUid: string): Promise<void> {
    const agent = await this.nodeAgentOn(node).catch(() => undefined);
    if (agent) await this.nodeAgents!.unstage(agent.address, podUid).catch(() => undefined);
  }

  /**
   * Puts a snapshot's workspace files into a running pod in two steps: the archive is extracted
   * into a scratch directory while its digest is computed here, and the files are moved into
   * /workspace only if the digest matched; otherwise the scratch is removed and nothing changed.
   */
  private async restoreWorkspace(pod: string, restore: RestoreSource): Promise<void> {
    const target = { namespace: this.namespace, pod, container: SANDBOX_CONTAINER };
    const archive = storedArchiveOf(this.name, restore);
    const { compression, stream } = await detectCompression(await restore.storage.get(archive.key));
    const source = stream.pipe(verifyArchive(archive.key, archive.sha256));
    const verified = new Promise<Error | undefined>((resolve) => {
      source.on('error', resolve);
      source.on('end', () => resolve(undefined));
    });
    const extracted = await streamInPod(this.options.kubeConfig, target, ['sh', '-c', restoreExtract(compression)], {
      stdin: source,
      timeoutMs: 30 * 60_000,
    });
    const failure = await verified;
    if (failure || extracted.exitCode !== 0) {
      await streamInPod(this.options.kubeConfig, target, ['sh', '-c', RESTORE_ABORT], { timeoutMs: 60_000 }).catch(() => undefined);
      if (failure instanceof ArchiveIntegrityError) throw new ProviderError(this.name, failure.message, { corrupted: true });
      throw new ProviderError(this.name, `restoring the workspace failed: ${failure?.message ?? extracted.stderr.trim()}`);
    }
    const committed = await streamInPod(this.options.kubeConfig, target, ['sh', '-c', RESTORE_COMMIT], { timeoutMs: 10 * 60_000 });
    if (committed.exitCode !== 0) throw new ProviderError(this.name, `restoring the workspace failed: ${committed.stderr.trim()}`);
  }

  private async annotate(name: string, annotations: Record<string, string>): Promise<void> {
    await this.core.patchNamespacedPod(
      { name, namespace: this.namespace, body: { metadata: { annotations } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  private async deletePod(name: string): Promise<void> {
    try {
      await this.core.deleteNamespacedPod({ name, namespace: this.namespace, gracePeriodSeconds: 0 });
    } catch (error) {
      if (!isApiError(error, 404)) throw new ProviderError(this.name, `deleting pod ${name}: ${(error as Error).message}`);
    }
    await this.deleteSecret(`${name}-env`);
  }

  private async deleteSecret(name: string): Promise<void> {
    try {
      await this.core.deleteNamespacedSecret({ name, namespace: this.namespace });
    } catch (error) {
      if (!isApiError(error, 404)) throw new ProviderError(this.name, `deleting secret ${name}: ${(error as Error).message}`);
    }
  }

  /** The agent's secrets as a Secret beside its pod (replaced if it exists), so the pod spec names it and holds no value. */
  private async writeEnvSecret(name: string, request: ProvisionRequest): Promise<string> {
    const secretName = `${name}-env`;
    const owner = this.ownerOf(request);
    const body = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: secretName,
        namespace: this.namespace,
        labels: { [SandboxLabels.agent]: name },
        ...(owner ? { ownerReferences: [{ ...owner, blockOwnerDeletion: true }] } : {}),
      },
      type: 'Opaque',
      stringData: request.env,
    };
    try {
      await this.core.createNamespacedSecret({ namespace: this.namespace, body });
    } catch (error) {
      if (!isApiError(error, 409)) throw new ProviderError(this.name, `creating secret ${secretName}: ${(error as Error).message}`);
      await this.core.replaceNamespacedSecret({ name: secretName, namespace: this.namespace, body });
    }
    return secretName;
  }

  /**
   * What a pod with an egress policy needs (ADR 52): the gateway's address, and its CA Secret,
   * made now if it does not exist (a pod made again for the same agent keeps trusting the CA it had).
   */
  private async egressOf(name: string, request: ProvisionRequest): Promise<{ proxyUrl: string; caSecret: string }> {
    const gateway = this.options.egressGateway;
    if (gateway === undefined) throw new UnsupportedRequestError(this.name, 'egress: this install has no egress gateway');
    const body = egressCaSecret(name, this.namespace, createCertificateAuthority(`Berth sandbox ${request.agentId}`), this.ownerOf(request));
    try {
      await this.core.createNamespacedSecret({ namespace: this.namespace, body });
    } catch (error) {
      if (!isApiError(error, 409)) throw new ProviderError(this.name, `creating secret ${body.metadata!.name}: ${(error as Error).message}`);
    }
    let address: string;
    try {
      address = await this.gatewayAddress(gateway);
    } catch (error) {
      throw new ProviderError(this.name, `resolving the egress gateway ${gateway}: ${(error as Error).message}`);
    }
    return { proxyUrl: `http://${address}`, caSecret: body.metadata!.name! };
  }

  /**
   * `host:port` with the host made an address, so that a pod given it needs no DNS: a Service's name
   * (`<name>.<namespace>.svc…`, the chart's) becomes its ClusterIP, read from the API server; another
   * name is resolved; an address is kept as it is.
   */
  private async gatewayAddress(gateway: string): Promise<string> {
    // Resolved at most once per GATEWAY_ADDRESS_TTL_MS, not once per pod: a Service's cluster IP
    // is fixed while it exists, and a gateway made again is found within the TTL.
    const now = Date.now();
    if (this.gatewayResolved && now < this.gatewayResolved.until) return this.gatewayResolved.address;
    const address = await this.resolveGateway(gateway);
    this.gatewayResolved = { address, until: now + GATEWAY_ADDRESS_TTL_MS };
    return address;
  }

  private async resolveGateway(gateway: string): Promise<string> {
    const authority = parseAuthority(gateway);
    if (!authority) throw new Error(`the egress gateway must be host:port, not "${gateway}"`);
    const service = serviceOfGatewayHost(authority.host);
    let address = authority.host;
    if (service) {
      const clusterIp = (await this.core.readNamespacedService(service)).spec?.clusterIP;
      if (!clusterIp || isIP(clusterIp) === 0) throw new Error(`service ${service.namespace}/${service.name} has no cluster IP`);
      address = clusterIp;
    } else if (isIP(address) === 0) {
      address = (await lookup(address)).address;
    }
    return isIP(address) === 6 ? `[${address}]:${authority.port}` : `${address}:${authority.port}`;
  }

  /** The sandbox container of the sandbox's pod, for exec and streams through the API server. */
  private podTarget(ref: SandboxRef): { namespace: string; pod: string; container: string } {
    return { namespace: this.namespace, pod: podNameOf(ref), container: SANDBOX_CONTAINER };
  }

  /** The Agent as owner of a sandbox's objects; owner references cannot cross namespaces. */
  private ownerOf(request: ProvisionRequest): ProvisionRequest['owner'] {
    return this.options.resourceNamespace === this.namespace ? request.owner : undefined;
  }

  /**
   * The gateway reads the policy from the Agent itself, on every replica; this only refuses a
   * policy that allows anything for a pod made without the gateway (by an earlier Berth, or before
   * the install had a gateway), whose network is the install's sandbox NetworkPolicy.
   */
  async setEgress(ref: SandboxRef, egress: SandboxEgress): Promise<void> {
    if (!egressAllowsAnything(egress)) return;
    const pod = await this.readPod(podNameOf(ref));
    if (!pod || pod.metadata?.labels?.[SandboxLabels.egress] === EGRESS_GATEWAY) return;
    throw new ProviderError(this.name, 'this sandbox pod was made without the egress gateway: terminate the agent and create it again to give it an egress policy', {
      sandbox: ref.id,
    });
  }

  watchSandboxes(onChange: (agentId: string) => void): { stop(): void } {
    const selector = `${SandboxLabels.sandbox}=true`;
    const informer = startInformer<V1Pod>(
      this.options.kubeConfig,
      `/api/v1/namespaces/${this.namespace}/pods`,
      () => this.core.listNamespacedPod({ namespace: this.namespace, labelSelector: selector }),
      {
        onChange: (pod) => {
          const agent = pod.metadata?.labels?.[SandboxLabels.agent];
          if (agent) onChange(objectNameToId(agent));
        },
      },
      { labelSelector: selector, log: this.options.log, what: 'sandbox pods' },
    );
    this.pods = informer;
    return {
      stop: () => {
        this.pods = undefined;
        void informer.stop();
      },
    };
  }
}

/** Pod phase to sandbox state: ready means the container runs; a deadline kill is the timeout. */
export function podState(pod: V1Pod): SandboxState {
  if (pod.metadata?.deletionTimestamp) return 'stopped';
  switch (pod.status?.phase) {
    case 'Running': {
      const container = pod.status.containerStatuses?.find((status) => status.name === SANDBOX_CONTAINER);
      return container?.state?.running ? 'running' : 'pending';
    }
    case 'Failed':
      return pod.status.reason === 'DeadlineExceeded' ? 'expired' : 'stopped';
    case 'Succeeded':
      return 'stopped';
    default:
      return 'pending';
  }
}

function describePending(pod: V1Pod): string {
  const waiting = pod.status?.containerStatuses?.find((status) => status.name === SANDBOX_CONTAINER)?.state?.waiting;
  if (waiting?.reason) return `waiting: ${waiting.reason}${waiting.message ? ` (${waiting.message})` : ''}`;
  const unscheduled = pod.status?.conditions?.find((condition) => condition.type === 'PodScheduled' && condition.status === 'False');
  if (unscheduled) return `not scheduled: ${unscheduled.message ?? unscheduled.reason ?? 'no node fits'}`;
  return `${(pod.status?.phase ?? 'pending').toLowerCase()}`;
}

/** Size and digest of an archive already in storage, read back by streaming it through a hash. */
async function describeStored(target: CheckpointTarget): Promise<StoredArchive> {
  const hash = createHash('sha256');
  let sizeBytes = 0;
  for await (const chunk of await target.storage.get(target.key)) {
    hash.update(chunk as Buffer);
    sizeBytes += (chunk as Buffer).length;
  }
  return { key: target.key, sizeBytes, sha256: hash.digest('hex') };
}
