import { describe, expect, it } from 'vitest';
import { egressAllowsAnything, unsupportedReason, type ProviderCapabilities } from './provider.js';

const capabilities: ProviderCapabilities = { computes: ['python'], browser: false, gpuTypes: [], storage: false, checkpoint: 'none' };
const request = { compute: 'python' as const, browser: false };

describe('egress support', () => {
  it('refuses any policy on a provider that does not enforce egress, naming egress', () => {
    const kubernetes = { name: 'kubernetes', capabilities };
    expect(unsupportedReason(kubernetes, { ...request, egress: { hosts: ['pypi.org'], cidrs: [] } })).toEqual({
      field: 'egress',
      message: 'provider "kubernetes" does not enforce egress policies yet (its sandboxes\' network is set by the install); remove "egress" or use the local provider',
    });
    // An empty policy promises no network, which such a provider cannot keep either.
    expect(unsupportedReason(kubernetes, { ...request, egress: { hosts: [], cidrs: [] } })?.field).toBe('egress');
    expect(unsupportedReason(kubernetes, request)).toBeUndefined();
    expect(unsupportedReason({ name: 'local', capabilities: { ...capabilities, egress: true } }, { ...request, egress: { hosts: ['pypi.org'], cidrs: [] } })).toBeUndefined();
  });

  it('tells a policy that allows something from the default', () => {
    expect(egressAllowsAnything(undefined)).toBe(false);
    expect(egressAllowsAnything({ hosts: [], cidrs: [], credentials: [] })).toBe(false);
    expect(egressAllowsAnything({ hosts: ['a.example'], cidrs: [], credentials: [] })).toBe(true);
  });
});
