import { describe, expect, it } from 'vitest';
import { sandboxSpec } from './bundle.js';
import { localManifest, parseManifest, whyNotNative, type SnapshotManifest } from './manifest.js';

const spec = sandboxSpec({
  containerId: 'agt_1',
  image: 'browser',
  compute: 'node',
  rootfs: '/images/browser-abc/rootfs',
  workspace: '/data/sandboxes/agt_1/workspace',
  execDir: '/data/sandboxes/agt_1/exec', guestDir: '/opt/berth/guest',
  env: {},
  cpus: 1,
  memoryBytes: 1024 ** 3,
  tmpBytes: 64 * 1024 ** 2,
});
const RUNTIME = 'runsc version v0.0.0-20260905035102-160fafc42237';
const manifest = localManifest({ level: 'native', agentId: 'agt_1', spec, runtime: RUNTIME, createdAt: new Date('2026-01-02T03:04:05Z') });

describe('localManifest', () => {
  it('records what the sandbox ran on, from its spec', () => {
    expect(manifest).toEqual({
      formatVersion: 1,
      provider: 'local',
      level: 'native',
      agentId: 'agt_1',
      createdAt: '2026-01-02T03:04:05.000Z',
      sandbox: { image: 'browser', compute: 'node', rootfs: '/images/browser-abc/rootfs', runtime: RUNTIME, spec },
    });
  });

  it('keeps the names of secrets, never their values', () => {
    const withSecret = sandboxSpec({ containerId: 'agt_1', image: 'python', compute: 'python', rootfs: '/r', workspace: '/w', execDir: '/e', guestDir: '/opt/berth/guest', env: { API_TOKEN: 'hunter2' }, cpus: 1, memoryBytes: 1024 ** 3, tmpBytes: 1024 ** 2 });
    const recorded = localManifest({ level: 'native', agentId: 'agt_1', spec: withSecret, runtime: RUNTIME, createdAt: new Date() });
    expect(JSON.stringify(recorded)).not.toContain('hunter2');
    expect(recorded.sandbox!.spec.annotations).toMatchObject({ 'berth.dev/secret-env': 'API_TOKEN' });
  });

  it('reads back as written', () => {
    expect(parseManifest(JSON.stringify(manifest))).toEqual(manifest);
  });
});

describe('parseManifest', () => {
  const valid = { formatVersion: 1, provider: 'kubernetes', level: 'filesystem', agentId: 'agt_1', createdAt: '2026-01-02T03:04:05Z' };

  it('takes a manifest without a sandbox record (files only, from any provider)', () => {
    expect(parseManifest(JSON.stringify(valid))).toEqual(valid);
  });

  it.each([
    ['not JSON', '{', /is not JSON/],
    ['not an object', '[]', /is not an object/],
    ['a newer format', JSON.stringify({ ...valid, formatVersion: 2 }), /has format 2; this Berth reads format 1/],
    ['no provider', JSON.stringify({ ...valid, provider: undefined }), /has no provider/],
    ['an unknown level', JSON.stringify({ ...valid, level: 'memory' }), /has no level/],
    ['a sandbox record without its spec', JSON.stringify({ ...valid, sandbox: { rootfs: '/r', runtime: 'x' } }), /incomplete sandbox record/],
  ])('refuses %s', (_case, text, message) => {
    expect(() => parseManifest(text)).toThrow(message);
  });
});

describe('whyNotNative', () => {
  const here = { hasCheckpoint: true, rootfsExists: true, runtime: RUNTIME };

  it('allows a native snapshot made here, on a root filesystem still here, by the same runsc', () => {
    expect(whyNotNative(manifest, here)).toBeUndefined();
  });

  it.each<[string, SnapshotManifest | undefined, typeof here, RegExp]>([
    ['it has no manifest', undefined, here, /has no manifest.json/],
    ['another provider made it', { ...manifest, provider: 'kubernetes' }, here, /made by provider "kubernetes"/],
    ['it is files only', { ...manifest, level: 'filesystem' }, here, /holds files only/],
    ['the archive has no checkpoint', manifest, { ...here, hasCheckpoint: false }, /holds files only/],
    ['the image was rebuilt', manifest, { ...here, rootfsExists: false }, /\/images\/browser-abc\/rootfs\) is gone/],
    ['runsc changed', manifest, { ...here, runtime: 'runsc version v2' }, /this host runs runsc version v2/],
  ])('refuses when %s', (_case, snapshot, facts, reason) => {
    expect(whyNotNative(snapshot, facts)).toMatch(reason);
  });
});
