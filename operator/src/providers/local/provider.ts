import { randomUUID } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Compute, SandboxRef } from '@berth/crds';
import {
  ExecTimeoutError,
  ProviderError,
  UnsupportedRequestError,
  unsupportedReason,
  type ExecRequest,
  type ExecResult,
  type Logger,
  type ProviderCapabilities,
  type ProvisionRequest,
  type SandboxProvider,
  type SandboxState,
} from '@berth/common';
import { INTERPRETERS, stoppedByTimeout, timeoutPrefix } from '../program.js';
import { sandboxSpec } from './bundle.js';
import { isImageName, type ImageName, type ImageStore } from './images.js';
import { Runsc, RunscError } from './runsc.js';

export interface LocalProviderOptions {
  runsc: Runsc;
  images: ImageStore;
  /** Sandboxes' bundles and workspaces live under `<sandboxDir>/<agent id>/`. */
  sandboxDir: string;
  cpus: number;
  memoryBytes: number;
  /** The image of browser agents, normally `browser`; browser agents are refused while unset. */
  browserImage?: string;
  maxOutputBytes?: number;
  log: Logger;
}

const IMAGE_FOR_COMPUTE: Record<Compute, ImageName> = { python: 'python', node: 'node', go: 'go' };

/** Where the host puts exec'd programs; read-only inside the sandbox. */
const EXEC_MOUNT = '/run/berth/exec';

// Modules in /workspace import as they would from a script there.
const EXEC_ENV = { PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1', PYTHONPATH: '/workspace' };

/** Sandboxes on this host in gVisor: one long-lived `runsc` container per agent. */
export class LocalProvider implements SandboxProvider {
  readonly name = 'local';
  readonly capabilities: ProviderCapabilities;
  private readonly browserImage: ImageName | undefined;

  constructor(private readonly options: LocalProviderOptions) {
    if (options.browserImage !== undefined && !isImageName(options.browserImage)) {
      throw new ProviderError(
        this.name,
        `browser image "${options.browserImage}" is not a local sandbox image; set BERTH_BROWSER_IMAGE=browser`,
      );
    }
    this.browserImage = options.browserImage;
    this.capabilities = {
      computes: ['python', 'node', 'go'],
      browser: this.browserImage !== undefined,
      gpuTypes: [],
      storage: false,
      checkpoint: 'none',
    };
  }

  /** The runsc version line; fails when runsc cannot be run. */
  runtimeVersion(): Promise<string> {
    return this.options.runsc.version();
  }

  /** Builds the default image ahead of the first agent, if it is missing. */
  async prepareImages(): Promise<void> {
    await this.options.images.ensure(IMAGE_FOR_COMPUTE.python);
  }

  private paths(agentId: string) {
    const root = join(this.options.sandboxDir, agentId);
    return {
      root,
      bundle: join(root, 'bundle'),
      workspace: join(root, 'workspace'),
      exec: join(root, 'exec'),
      console: join(root, 'console.log'),
    };
  }

  async provision(request: ProvisionRequest): Promise<SandboxRef> {
    const unsupported = unsupportedReason(this, request);
    if (unsupported) throw new UnsupportedRequestError(this.name, `${unsupported.field}: ${unsupported.message}`);
    const containerId = request.agentId;
    // As in clusters, browser agents get the browser image whatever their compute: it runs python3,
    // Node.js and bash, but has no pip or Go. Without one, unsupportedReason refused them above.
    const image = request.browser && this.browserImage ? this.browserImage : IMAGE_FOR_COMPUTE[request.compute];
    const ref: SandboxRef = { provider: this.name, id: containerId, details: { image } };
    const status = await this.options.runsc.state(containerId);
    if (status === 'running') return ref; // adopt the sandbox a previous process started
    if (status !== undefined) await this.options.runsc.delete(containerId);

    const rootfs = await this.options.images.ready(image);
    const paths = this.paths(request.agentId);
    // The workspace outlives the container: a sandbox recreated after a host restart finds its files.
    await mkdir(paths.workspace, { recursive: true });
    await mkdir(paths.bundle, { recursive: true });
    await mkdir(paths.exec, { recursive: true });
    const spec = sandboxSpec({
      containerId,
      rootfs,
      workspace: paths.workspace,
      execDir: paths.exec,
      env: request.env,
      cpus: this.options.cpus,
      memoryBytes: this.options.memoryBytes,
    });
    await writeFile(join(paths.bundle, 'config.json'), JSON.stringify(spec, null, 2));
    try {
      await this.options.runsc.run(containerId, paths.bundle, paths.console);
    } catch (error) {
      await this.options.runsc.delete(containerId).catch(() => undefined);
      throw new ProviderError(this.name, `could not start the sandbox: ${(error as Error).message}`);
    }
    this.options.log.info({ agentId: request.agentId, image }, 'sandbox started');
    return ref;
  }

  async state(ref: SandboxRef): Promise<SandboxState> {
    const status = await this.options.runsc.state(ref.id);
    if (status === undefined) return 'missing';
    return status === 'running' ? 'running' : 'stopped';
  }

  /**
   * The host writes the program into the sandbox's read-only exec mount and runs it under
   * `timeout`, which stops the program and its children inside the sandbox when time is up.
   * No shell in between: each process started in gVisor costs about 10 ms.
   */
  async exec(ref: SandboxRef, request: ExecRequest): Promise<ExecResult> {
    const interpreter = INTERPRETERS[request.language];
    const file = `${randomUUID()}.${interpreter.extension}`;
    const hostFile = join(this.paths(ref.id).exec, file);
    try {
      await writeFile(hostFile, request.code, { mode: 0o644 });
    } catch (error) {
      throw new ProviderError(this.name, `the sandbox's files are gone: ${(error as Error).message}`, { sandbox: ref.id });
    }
    try {
      const result = await this.options.runsc.exec(
        ref.id,
        [...timeoutPrefix(request.timeoutMs), ...interpreter.argv, `${EXEC_MOUNT}/${file}`],
        {
          cwd: '/workspace',
          env: EXEC_ENV,
          stdin: '',
          // The in-sandbox timeout fires first; this one covers a sandbox that stops answering.
          timeoutMs: request.timeoutMs + 5_000,
          maxOutputBytes: this.options.maxOutputBytes ?? 1024 * 1024,
        },
      );
      if (result.timedOut || stoppedByTimeout(result)) {
        throw new ExecTimeoutError(request.timeoutMs);
      }
      if (/loading container|container .* (is not running|does not exist)|cannot exec in a stopped container/i.test(result.stderr)) {
        if ((await this.state(ref)) !== 'running') throw new ProviderError(this.name, 'the sandbox is not running', { sandbox: ref.id });
      }
      return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode, durationMs: result.durationMs };
    } finally {
      await rm(hostFile, { force: true });
    }
  }

  async terminate(ref: SandboxRef): Promise<void> {
    try {
      await this.options.runsc.kill(ref.id);
      await this.options.runsc.delete(ref.id);
    } catch (error) {
      if (!(error instanceof RunscError)) throw error;
      throw new ProviderError(this.name, error.message);
    }
    await rm(this.paths(ref.id).root, { recursive: true, force: true });
  }
}
