import { randomFillSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { visitorId, visitorKey, type KeyValueStore } from './visitor.js';

const random = (bytes: Uint8Array<ArrayBuffer>) => randomFillSync(bytes);

function mapStore(): KeyValueStore & { map: Map<string, string> } {
  const map = new Map<string, string>();
  return { map, getItem: (key) => map.get(key) ?? null, setItem: (key, value) => void map.set(key, value) };
}

describe('the visitor id', () => {
  it('is made once and kept per channel', () => {
    const store = mapStore();
    const first = visitorId(store, 'ch_a', random);
    expect(first).toMatch(/^v_[0-9a-f]{32}$/);
    expect(store.map.get(visitorKey('ch_a'))).toBe(first);
    expect(visitorId(store, 'ch_a', random)).toBe(first);
    expect(visitorId(store, 'ch_b', random)).not.toBe(first);
  });

  it('replaces a kept value that is not an id', () => {
    const store = mapStore();
    store.map.set(visitorKey('ch_a'), '<script>');
    const id = visitorId(store, 'ch_a', random);
    expect(id).toMatch(/^v_[0-9a-f]{32}$/);
    expect(store.map.get(visitorKey('ch_a'))).toBe(id);
  });

  it('works for the page alone where storage refuses', () => {
    const refusing: KeyValueStore = {
      getItem: () => {
        throw new Error('SecurityError');
      },
      setItem: () => {
        throw new Error('QuotaExceededError');
      },
    };
    expect(visitorId(refusing, 'ch_a', random)).toMatch(/^v_[0-9a-f]{32}$/);
    expect(visitorId(undefined, 'ch_a', random)).toMatch(/^v_[0-9a-f]{32}$/);
  });
});
