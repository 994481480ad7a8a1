import type { AgentSpec, ByoiRef, Mode } from '@berth/crds';
import type { ProviderConfig, SandboxProvider } from '@berth/common';
import { MockProvider } from './mock.js';

/**
 * Where BYOI providers come from: the organization's configuration of a provider (undefined:
 * it runs managed), and a provider built from such a configuration with its credential.
 */
export interface ByoiSource {
  config(organizationId: string, mode: Mode, provider: string): Promise<ProviderConfig | undefined>;
  /** Builds the provider for a BYOI reference; throws a ProviderError when it cannot be reached. */
  build(organizationId: string, mode: Mode, provider: string, ref: ByoiRef): Promise<SandboxProvider>;
}

type AgentTarget = Pick<AgentSpec, 'mode' | 'provider' | 'organizationId' | 'byoi' | 'providerFallback' | 'fallbackByoi'>;

/**
 * The providers of this install by name, and the BYOI providers of organizations. Test-mode
 * agents always get the mock stand-in of their provider, so a test key cannot reach real
 * compute whatever it asks for.
 */
export class ProviderRegistry {
  private readonly providers = new Map<string, SandboxProvider>();
  private readonly mocks = new Map<string, MockProvider>();
  private readonly byoiCache = new Map<string, Promise<SandboxProvider>>();
  /** The stand-in of BYOI providers for test keys. */
  private readonly genericMock: MockProvider;
  private byoi: ByoiSource | undefined;

  constructor(
    providers: SandboxProvider[],
    readonly defaultProvider: string,
  ) {
    for (const provider of providers) {
      this.providers.set(provider.name, provider);
      this.mocks.set(provider.name, new MockProvider(provider.capabilities));
    }
    if (!this.providers.has(defaultProvider)) throw new Error(`default provider ${defaultProvider} is not configured`);
    this.genericMock = this.mocks.get(defaultProvider)!;
  }

  /** Enables BYOI providers (PUT /v1/providers/:provider). */
  useByoi(source: ByoiSource): this {
    this.byoi = source;
    return this;
  }

  names(): string[] {
    return [...this.providers.keys()];
  }

  all(): SandboxProvider[] {
    return [...this.providers.values()];
  }

  get(name: string): SandboxProvider | undefined {
    return this.providers.get(name);
  }

  /** The organization's enabled BYOI configuration of `name`, if any. */
  async byoiConfig(organizationId: string, mode: Mode, name: string): Promise<ByoiRef | undefined> {
    const config = await this.byoi?.config(organizationId, mode, name);
    return config?.enabled ? { credentialRef: config.credentialRef, config: config.config } : undefined;
  }

  /**
   * The provider an agent names, as the organization sees it: its BYOI provider when the agent
   * carries a BYOI reference, else this install's provider of that name. For `which:
   * 'fallback'`, its providerFallback.
   */
  async forAgent(spec: AgentTarget, which: 'primary' | 'fallback' = 'primary'): Promise<SandboxProvider | undefined> {
    const name = which === 'primary' ? spec.provider : spec.providerFallback;
    if (name === undefined) return undefined;
    const managed = this.providers.get(name);
    if (spec.mode === 'test') return this.mocks.get(name) ?? (spec.byoi || spec.fallbackByoi ? this.genericMock : undefined);
    const ref = which === 'primary' ? spec.byoi : spec.fallbackByoi;
    if (ref && this.byoi) return this.byoiProvider(spec.organizationId, spec.mode, name, ref);
    return managed;
  }

  /** The provider holding a sandbox: the fallback's when the sandbox ran there. */
  async holding(spec: AgentTarget, sandboxProvider: string | undefined): Promise<SandboxProvider | undefined> {
    if (sandboxProvider !== undefined && spec.providerFallback === sandboxProvider && sandboxProvider !== spec.provider) {
      return this.forAgent(spec, 'fallback');
    }
    return this.forAgent(spec, 'primary');
  }

  private byoiProvider(organizationId: string, mode: Mode, name: string, ref: ByoiRef): Promise<SandboxProvider> {
    const key = JSON.stringify([organizationId, mode, name, ref]);
    let cached = this.byoiCache.get(key);
    if (!cached) {
      cached = this.byoi!.build(organizationId, mode, name, ref);
      this.byoiCache.set(key, cached);
      // A provider that could not be built is tried again next time, not remembered.
      cached.catch(() => this.byoiCache.delete(key));
    }
    return cached;
  }
}
