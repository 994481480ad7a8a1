import { Readable } from 'node:stream';
import type { SandboxRef } from '../../crds/src/agent.js';
import type {
  CheckpointResult,
  CheckpointTarget,
  ExecRequest,
  ExecResult,
  ProviderCapabilities,
  ProvisionRequest,
  SandboxProvider,
  SandboxState,
} from '../../common/src/index.js';

/**
 * Stand-ins for compute, for tests of the reconciler, billing and the API that need a provider
 * but no sandbox. Tests of a real provider use it; tests of what test keys get use MockProvider.
 */
const CAPABILITIES: ProviderCapabilities = { computes: ['python', 'node', 'go'], browser: false, gpuTypes: [], storage: false, checkpoint: 'none' };

export interface FakeProviderOptions {
  name?: string;
  capabilities?: Partial<ProviderCapabilities>;
}

/**
 * Sandboxes as entries in a map: provisioning adds one as running, terminating or checkpointing
 * removes it, and a test may set a sandbox's state, or the error the next provisions throw.
 */
export class ScriptedProvider implements SandboxProvider {
  readonly name: string;
  readonly capabilities: ProviderCapabilities;
  sandboxes = new Map<string, SandboxState>();
  nextProvisionError: Error | undefined;
  provisions = 0;
  terminations: string[] = [];
  execRequests: ExecRequest[] = [];

  constructor(options: FakeProviderOptions & { execResult?: Partial<ExecResult> } = {}) {
    this.name = options.name ?? 'scripted';
    this.capabilities = { ...CAPABILITIES, ...options.capabilities };
    this.execResult = { stdout: '', stderr: '', exitCode: 0, durationMs: 1, ...options.execResult };
  }
  private readonly execResult: ExecResult;

  async provision(request: ProvisionRequest): Promise<SandboxRef> {
    this.provisions++;
    if (this.nextProvisionError) throw this.nextProvisionError;
    this.sandboxes.set(request.agentId, 'running');
    return { provider: this.name, id: request.agentId };
  }
  async state(ref: SandboxRef): Promise<SandboxState> {
    return this.sandboxes.get(ref.id) ?? 'missing';
  }
  async exec(_ref: SandboxRef, request: ExecRequest): Promise<ExecResult> {
    this.execRequests.push(request);
    return { ...this.execResult };
  }
  async terminate(ref: SandboxRef): Promise<void> {
    this.terminations.push(ref.id);
    this.sandboxes.delete(ref.id);
  }
  /** Stores a small stand-in for the workspace, as a filesystem checkpoint, and ends the sandbox. */
  async checkpoint(ref: SandboxRef, target: CheckpointTarget): Promise<CheckpointResult> {
    const stored = await target.storage.put(target.key, Readable.from([Buffer.from(`workspace of ${ref.id}`)]));
    this.sandboxes.delete(ref.id);
    return { ...stored, level: 'filesystem' };
  }
}

/**
 * A provider for tests that create agents but never reconcile them: it has no sandboxes, and
 * anything that would start or use one fails the test.
 */
export class IdleProvider implements SandboxProvider {
  readonly name: string;
  readonly capabilities: ProviderCapabilities;

  constructor(options: FakeProviderOptions = {}) {
    this.name = options.name ?? 'idle';
    this.capabilities = { ...CAPABILITIES, ...options.capabilities };
  }

  async provision(): Promise<SandboxRef> {
    throw new Error('not reconciled in this test');
  }
  async state(): Promise<SandboxState> {
    return 'missing';
  }
  async exec(): Promise<ExecResult> {
    throw new Error('not reconciled in this test');
  }
  async terminate(): Promise<void> {}
  async checkpoint(): Promise<CheckpointResult> {
    throw new Error('not reconciled in this test');
  }
}
