import { Readable } from 'node:stream';
import {
  EXEC_OPTIONS,
  ExecTimeoutError,
  privateHostProblem,
  ProviderError,
  SandboxNotReadyError,
  UnsupportedRequestError,
  storedArchiveOf,
  verifyArchive,
  type CheckpointResult,
  type CheckpointTarget,
  type ExecOption,
  type ExecRequest,
  type ExecResult,
  type ProviderCapabilities,
  type ProvisionRequest,
  type SandboxProvider,
  type SandboxState,
} from '@berth/common';
import type { SandboxRef } from '@berth/crds';

/** How long a single protocol call may take, checkpoints and restores aside. */
const CALL_TIMEOUT_MS = 30_000;

/**
 * The `remote` provider: sandboxes on compute that speaks the remote provider protocol
 * (docs/remote-provider-protocol.md), such as another Berth install, configured per
 * organization with PUT /v1/providers/:provider (`config.endpoint`, the token in a secret).
 */
export class RemoteProvider implements SandboxProvider {
  private constructor(
    readonly name: string,
    readonly capabilities: ProviderCapabilities,
    private readonly endpoint: string,
    private readonly token: string,
    private readonly allowPrivate: boolean,
    /** The exec options the endpoint said it honours (`execOptions` of /capabilities; none from an endpoint that does not say). */
    readonly execOptions: readonly ExecOption[] = [],
  ) {}

  /** Asks the endpoint what it can run; a provider that cannot be reached is a ProviderError. */
  static async connect(name: string, endpoint: string, token: string, allowPrivate = false): Promise<RemoteProvider> {
    const probe = new RemoteProvider(name, { computes: [], browser: false, gpuTypes: [], storage: false, checkpoint: 'none' }, endpoint.replace(/\/+$/, ''), token, allowPrivate);
    const answer = (await probe.call('GET', '/capabilities')) as { protocol: number; capabilities: ProviderCapabilities; execOptions?: unknown };
    if (answer.protocol !== 1) throw new ProviderError(name, `${endpoint} speaks remote provider protocol ${answer.protocol}; this Berth speaks 1`);
    const execOptions = Array.isArray(answer.execOptions) ? EXEC_OPTIONS.filter((option) => (answer.execOptions as unknown[]).includes(option)) : [];
    return new RemoteProvider(name, answer.capabilities, probe.endpoint, token, allowPrivate, execOptions);
  }

  private async request(method: string, path: string, init: { body?: unknown; stream?: Readable; timeoutMs?: number } = {}): Promise<Response> {
    // Checked on every call, after DNS resolution: the endpoint's name may point inside the network by now.
    const inside = await privateHostProblem(this.endpoint, this.allowPrivate);
    if (inside) throw new ProviderError(this.name, `${this.endpoint} is refused: ${inside}`, { endpoint: this.endpoint });
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    let body: RequestInit['body'] | undefined;
    if (init.stream) {
      headers['content-type'] = 'application/octet-stream';
      body = Readable.toWeb(init.stream) as unknown as RequestInit['body'];
    } else if (init.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.body);
    }
    try {
      return await fetch(`${this.endpoint}${path}`, {
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        ...(init.stream ? { duplex: 'half' } : {}),
        signal: AbortSignal.timeout(init.timeoutMs ?? CALL_TIMEOUT_MS),
      } as RequestInit);
    } catch (error) {
      throw new ProviderError(this.name, `${this.endpoint} is unreachable: ${(error as Error).message}`, { endpoint: this.endpoint });
    }
  }

  /** A JSON call; the protocol's error answers become Berth's errors. */
  private async call(method: string, path: string, body?: unknown, timeoutMs?: number): Promise<unknown> {
    const response = await this.request(method, path, { body, ...(timeoutMs ? { timeoutMs } : {}) });
    return this.answer(response);
  }

  private async answer(response: Response): Promise<unknown> {
    const text = await response.text();
    let parsed: { error?: { code?: string; message?: string } } & Record<string, unknown> = {};
    try {
      parsed = text ? JSON.parse(text) : {};
    } catch {
      // not JSON: reported below by status
    }
    if (response.ok) return parsed;
    const message = parsed.error?.message ?? `answered ${response.status}`;
    if (response.status === 401) throw new ProviderError(this.name, `${this.endpoint} refused the token: ${message}`, { endpoint: this.endpoint });
    if (parsed.error?.code === 'timeout') throw new ExecTimeoutError(0);
    if (parsed.error?.code === 'unsupported_request') throw new UnsupportedRequestError(this.name, message);
    throw new ProviderError(this.name, `${this.endpoint}: ${message}`, { endpoint: this.endpoint, status: response.status });
  }

  async provision(request: ProvisionRequest): Promise<SandboxRef> {
    let restore: { key: string; sha256: string; sizeBytes: number; level: string } | undefined;
    if (request.restore) {
      // The archive goes first, streamed from this install's storage and checked on the way.
      const { storage, level } = request.restore;
      const archive = storedArchiveOf(this.name, request.restore);
      const key = `${request.agentId}-${archive.sha256.slice(0, 16)}`;
      const source = (await storage.get(archive.key)).pipe(verifyArchive(archive.key, archive.sha256));
      const uploaded = (await this.answer(await this.request('PUT', `/archives/${key}`, { stream: source, timeoutMs: 30 * 60_000 }))) as { sha256: string };
      if (uploaded.sha256 !== archive.sha256) throw new ProviderError(this.name, `the archive arrived at ${this.endpoint} altered`, { corrupted: true });
      restore = { key, sha256: archive.sha256, sizeBytes: archive.sizeBytes, level };
    }
    const response = await this.request('POST', '/sandboxes', {
      body: {
        agentId: request.agentId,
        sessionId: request.sessionId,
        timeoutSeconds: request.timeoutSeconds,
        compute: request.compute,
        browser: request.browser,
        ...(request.gpu ? { gpu: request.gpu } : {}),
        env: request.env,
        ...(restore ? { restore } : {}),
      },
      timeoutMs: 10 * 60_000,
    });
    const answer = (await this.answer(response)) as { id: string; state: string; message?: string; retryAfterMs?: number };
    if (response.status === 202) throw new SandboxNotReadyError(this.name, answer.message ?? `${this.endpoint} is starting the sandbox`, answer.retryAfterMs ?? 1_000);
    return { provider: this.name, id: answer.id };
  }

  async state(ref: SandboxRef): Promise<SandboxState> {
    const answer = (await this.call('GET', `/sandboxes/${ref.id}`)) as { state: SandboxState };
    return answer.state;
  }

  async exec(ref: SandboxRef, request: ExecRequest): Promise<ExecResult> {
    try {
      const { stdin, ...rest } = request;
      const body = { ...rest, ...(stdin !== undefined ? { stdin: stdin.toString('base64') } : {}) };
      return (await this.call('POST', `/sandboxes/${ref.id}/exec`, body, request.timeoutMs + 15_000)) as ExecResult;
    } catch (error) {
      if (error instanceof ExecTimeoutError) throw new ExecTimeoutError(request.timeoutMs);
      throw error;
    }
  }

  async terminate(ref: SandboxRef): Promise<void> {
    await this.call('DELETE', `/sandboxes/${ref.id}`);
  }

  /** The remote checkpoints the sandbox and streams the archive back into this install's storage. */
  async checkpoint(ref: SandboxRef, target: CheckpointTarget): Promise<CheckpointResult> {
    const response = await this.request('POST', `/sandboxes/${ref.id}/checkpoint`, { body: { native: target.native }, timeoutMs: 30 * 60_000 });
    if (!response.ok || !response.body) {
      await this.answer(response);
      throw new ProviderError(this.name, `${this.endpoint} sent no archive`);
    }
    const level = response.headers.get('x-berth-level') === 'native' ? 'native' : 'filesystem';
    const expected = response.headers.get('x-berth-sha256');
    const stored = await target.storage.put(target.key, Readable.fromWeb(response.body as import('node:stream/web').ReadableStream));
    if (expected && stored.sha256 !== expected) {
      await target.storage.delete(target.key);
      throw new ProviderError(this.name, `the checkpoint archive from ${this.endpoint} arrived altered`);
    }
    return { ...stored, level };
  }
}
