import type { AgentSpec } from '@berth/crds';
import type { SandboxProvider } from '@berth/common';
import { MockProvider } from './mock.js';

/**
 * The providers of this install by name. Test-mode agents always get the mock stand-in of
 * their provider, so a test key cannot reach real compute whatever it asks for.
 */
export class ProviderRegistry {
  private readonly providers = new Map<string, SandboxProvider>();
  private readonly mocks = new Map<string, MockProvider>();

  constructor(
    providers: SandboxProvider[],
    readonly defaultProvider: string,
  ) {
    for (const provider of providers) {
      this.providers.set(provider.name, provider);
      this.mocks.set(provider.name, new MockProvider(provider.capabilities));
    }
    if (!this.providers.has(defaultProvider)) throw new Error(`default provider ${defaultProvider} is not configured`);
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

  forAgent(spec: Pick<AgentSpec, 'mode' | 'provider'>): SandboxProvider | undefined {
    return spec.mode === 'test' ? this.mocks.get(spec.provider) : this.providers.get(spec.provider);
  }
}
