import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Compute, SandboxRef } from '@berth/crds';
import {
  ExecTimeoutError,
  ProviderError,
  UnsupportedRequestError,
  unsupportedReason,
  type ExecLanguage,
  type ExecRequest,
  type ExecResult,
  type Logger,
  type ProviderCapabilities,
  type ProvisionRequest,
  type SandboxProvider,
  type SandboxState,
} from '@berth/common';
import { sandboxSpec } from './bundle.js';
import type { ImageName, ImageStore } from './images.js';
import { Runsc, RunscError } from './runsc.js';

export interface LocalProviderOptions {
  runsc: Runsc;
  images: ImageStore;
  /** Sandboxes' bundles and workspaces live under `<sandboxDir>/<agent id>/`. */
  sandboxDir: string;
  cpus: number;
  memoryBytes: number;
  browserImage?: string;
  maxOutputBytes?: number;
  log: Logger;
}

const IMAGE_FOR_COMPUTE: Record<Compute, ImageName> = { python: 'base', node: 'base', go: 'go' };

/**
 * Reads the code from stdin into a file and runs it under `timeout`, so that the process
 * is killed inside the sandbox when its time is up even if the host side is gone.
 */
const EXEC_SCRIPT = `
dir=$(mktemp -d /tmp/berth-exec.XXXXXX) || exit 125
trap 'rm -rf "$dir"' EXIT
case "$1" in
  python) file="$dir/main.py"; set -- "$2" python3 -u "$file" ;;
  typescript) file="$dir/main.ts"; set -- "$2" node --experimental-transform-types --disable-warning=ExperimentalWarning "$file" ;;
  bash) file="$dir/main.sh"; set -- "$2" bash "$file" ;;
  *) echo "unknown language $1" >&2; exit 125 ;;
esac
cat >"$file" || exit 125
secs=$1; shift
timeout -k 2 "$secs" "$@" </dev/null
`;

const EXEC_ENV = { PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1' };

/** Sandboxes on this host in gVisor: one long-lived `runsc` container per agent. */
export class LocalProvider implements SandboxProvider {
  readonly name = 'local';
  readonly capabilities: ProviderCapabilities;

  constructor(private readonly options: LocalProviderOptions) {
    this.capabilities = {
      computes: ['python', 'node', 'go'],
      browser: options.browserImage !== undefined,
      gpu: false,
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
    return { root, bundle: join(root, 'bundle'), workspace: join(root, 'workspace'), console: join(root, 'console.log') };
  }

  async provision(request: ProvisionRequest): Promise<SandboxRef> {
    const unsupported = unsupportedReason(this, request);
    if (unsupported) throw new UnsupportedRequestError(this.name, `${unsupported.field}: ${unsupported.message}`);
    const containerId = request.agentId;
    const image = IMAGE_FOR_COMPUTE[request.compute];
    const ref: SandboxRef = { provider: this.name, id: containerId, details: { image } };
    const status = await this.options.runsc.state(containerId);
    if (status === 'running') return ref; // adopt the sandbox a previous process started
    if (status !== undefined) await this.options.runsc.delete(containerId);

    const rootfs = await this.options.images.ready(image);
    const paths = this.paths(request.agentId);
    // The workspace outlives the container: a sandbox recreated after a host restart finds its files.
    await mkdir(paths.workspace, { recursive: true });
    await mkdir(paths.bundle, { recursive: true });
    const spec = sandboxSpec({
      containerId,
      rootfs,
      workspace: paths.workspace,
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

  async exec(ref: SandboxRef, request: ExecRequest): Promise<ExecResult> {
    const seconds = Math.max(1, Math.ceil(request.timeoutMs / 1000));
    const result = await this.options.runsc.exec(ref.id, ['/bin/sh', '-c', EXEC_SCRIPT, 'berth-exec', request.language satisfies ExecLanguage, String(seconds)], {
      cwd: '/workspace',
      env: EXEC_ENV,
      stdin: request.code,
      // The in-sandbox timeout fires first; this one covers a sandbox that stops answering.
      timeoutMs: request.timeoutMs + 5_000,
      maxOutputBytes: this.options.maxOutputBytes ?? 1024 * 1024,
    });
    if (result.timedOut || (result.exitCode === 124 && result.durationMs >= request.timeoutMs)) {
      throw new ExecTimeoutError(request.timeoutMs);
    }
    if (result.exitCode === 125 || /loading container|container .* (is not running|does not exist)/i.test(result.stderr)) {
      if ((await this.state(ref)) !== 'running') throw new ProviderError(this.name, 'the sandbox is not running', { sandbox: ref.id });
    }
    return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode, durationMs: result.durationMs };
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
