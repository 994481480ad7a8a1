import { describe, expect, it } from 'vitest';
import { SandboxAliases } from './aliases.js';

describe('SandboxAliases', () => {
  it('finds the agent holding a sandbox, other than the one asking', () => {
    const aliases = new SandboxAliases();
    aliases.set('agt_a', 'wsb_1');
    aliases.set('agt_b', 'wsb_2');
    expect(aliases.sandboxOf('agt_a')).toBe('wsb_1');
    expect(aliases.holderOf('wsb_1')).toBe('agt_a');
    expect(aliases.holderOf('wsb_1', 'agt_a')).toBeUndefined();
    expect(aliases.holderOf('wsb_2', 'agt_a')).toBe('agt_b');
    expect(aliases.holderOf('wsb_3')).toBeUndefined();
  });

  it('moves an agent to another sandbox without leaving it holding the first', () => {
    const aliases = new SandboxAliases();
    aliases.set('agt_a', 'wsb_1');
    aliases.set('agt_a', 'wsb_2');
    expect(aliases.sandboxOf('agt_a')).toBe('wsb_2');
    expect(aliases.holderOf('wsb_1')).toBeUndefined();
    expect(aliases.holderOf('wsb_2')).toBe('agt_a');
  });

  it('forgets an agent both ways, and keeps another holder of the same sandbox', () => {
    const aliases = new SandboxAliases();
    // Two links to one sandbox cannot be made by a claim, but can be read back from a disk left so by hand.
    aliases.set('agt_a', 'wsb_1');
    aliases.set('agt_b', 'wsb_1');
    aliases.delete('agt_a');
    expect(aliases.has('agt_a')).toBe(false);
    expect(aliases.sandboxOf('agt_a')).toBeUndefined();
    expect(aliases.holderOf('wsb_1')).toBe('agt_b');
    aliases.delete('agt_b');
    expect(aliases.holderOf('wsb_1')).toBeUndefined();
    aliases.delete('agt_c');
  });
});
