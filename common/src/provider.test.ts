import { describe, expect, it } from 'vitest';
import { egressAllowsAnything, unsupportedReason, type ProviderCapabilities } from './provider.js';

const capabilities: ProviderCapabilities = { computes: ['python'], browser: false, gpuTypes: [], storage: false, checkpoint: 'none' };
const request = { compute: 'python' as const, browser: false };

describe('egress support', () => {
  it('refuses a policy that allows anything on a provider that does not enforce egress, naming egress', () => {
    const kubernetes = { name: 'kubernetes', capabilities };
    expect(unsupportedReason(kubernetes, { ...request, egress: { hosts: ['pypi.org'], cidrs: [] } })).toEqual({
      field: 'egress',
      message: 'provider "kubernetes" does not enforce egress policies yet, so its sandboxes have no way out; remove "egress" (or leave it empty) or use the local provider',
    });
    expect(unsupportedReason(kubernetes, { ...request, egress: { hosts: [], cidrs: ['10.0.0.0/8'] } })?.field).toBe('egress');
    // No network at all is what every provider gives.
    expect(unsupportedReason(kubernetes, { ...request, egress: { hosts: [], cidrs: [] } })).toBeUndefined();
    expect(unsupportedReason({ name: 'local', capabilities: { ...capabilities, egress: true } }, { ...request, egress: { hosts: ['pypi.org'], cidrs: [] } })).toBeUndefined();
  });

  it('tells a policy that allows something from the default', () => {
    expect(egressAllowsAnything(undefined)).toBe(false);
    expect(egressAllowsAnything({ hosts: [], cidrs: [], credentials: [] })).toBe(false);
    expect(egressAllowsAnything({ hosts: ['a.example'], cidrs: [], credentials: [] })).toBe(true);
  });
});
