import { describe, expect, it } from 'vitest';
import { idToObjectName, isId, newId, objectNameToId } from './ids.js';

describe('ids', () => {
  it('carry the kind prefix and 26 lowercase base32 characters', () => {
    expect(newId('agt')).toMatch(/^agt_[0-9a-hjkmnp-tv-z]{26}$/);
  });

  it('sort by creation time', () => {
    const earlier = newId('ses', new Date('2026-01-01T00:00:00Z'));
    const later = newId('ses', new Date('2026-01-01T00:00:00.001Z'));
    expect(earlier < later).toBe(true);
  });

  it('are unique', () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => newId('req')));
    expect(ids.size).toBe(10_000);
  });

  it('become valid Kubernetes object names and back', () => {
    const id = newId('agt');
    const name = idToObjectName(id);
    expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    expect(objectNameToId(name)).toBe(id);
  });

  it('are recognised by prefix and shape', () => {
    expect(isId(newId('ses'), 'ses')).toBe(true);
    expect(isId(newId('agt'), 'ses')).toBe(false);
    expect(isId('ses_../../etc', 'ses')).toBe(false);
    expect(isId('ses_', 'ses')).toBe(false);
  });
});
