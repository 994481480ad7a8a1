import { createHash } from 'node:crypto';
import type { SandboxRef } from '@berth/crds';
import {
  UnsupportedRequestError,
  unsupportedReason,
  type ExecRequest,
  type ExecResult,
  type ProviderCapabilities,
  type ProvisionRequest,
  type SandboxProvider,
  type SandboxState,
} from '@berth/common';

/**
 * What test keys (`svc_test_`) get instead of compute: the same validation and the same
 * shapes, answered at once, deterministic, and without touching a real provider.
 */
export class MockProvider implements SandboxProvider {
  readonly name = 'mock';

  /** Mirrors the capabilities of the provider it stands in for, so test keys are refused what live keys are. */
  constructor(readonly capabilities: ProviderCapabilities) {}

  async provision(request: ProvisionRequest): Promise<SandboxRef> {
    const unsupported = unsupportedReason(this, request);
    if (unsupported) throw new UnsupportedRequestError(this.name, `${unsupported.field}: ${unsupported.message}`);
    return { provider: this.name, id: request.agentId };
  }

  async state(): Promise<SandboxState> {
    return 'running';
  }

  async exec(_ref: SandboxRef, request: ExecRequest): Promise<ExecResult> {
    const digest = createHash('sha256').update(request.language).update('\0').update(request.code).digest();
    return {
      stdout: `[test mode] ${request.language} code (${Buffer.byteLength(request.code)} bytes) accepted; test keys do not run code\n`,
      stderr: '',
      exitCode: 0,
      durationMs: 5 + (digest[0]! % 40),
    };
  }

  async terminate(): Promise<void> {}
}
