import { describe, expect, it } from 'vitest';
import { sandboxSpec } from './bundle.js';

const input = {
  containerId: 'agt_1',
  rootfs: '/images/base/rootfs',
  workspace: '/data/sandboxes/agt_1/workspace',
  execDir: '/data/sandboxes/agt_1/exec',
  env: { EXTRA: 'yes' },
  cpus: 1.5,
  memoryBytes: 512 * 1024 ** 2,
};

describe('sandboxSpec', () => {
  const spec = sandboxSpec(input) as any;

  it('shares the image (runsc overlays it in memory) and mounts the workspace read-write', () => {
    expect(spec.root).toEqual({ path: '/images/base/rootfs', readonly: false });
    expect(spec.mounts).toContainEqual({ destination: '/workspace', type: 'bind', source: input.workspace, options: ['rbind', 'rw'] });
    expect(spec.mounts).toContainEqual({ destination: '/run/berth/exec', type: 'bind', source: input.execDir, options: ['rbind', 'ro'] });
    expect(spec.process.cwd).toBe('/workspace');
  });

  it('limits CPU, memory and processes', () => {
    expect(spec.linux.resources).toEqual({
      memory: { limit: 512 * 1024 ** 2 },
      cpu: { quota: 150_000, period: 100_000 },
      pids: { limit: 1024 },
    });
    expect(spec.linux.cgroupsPath).toBe('/berth/agt_1');
  });

  it('runs tini as PID 1 without new privileges and with few capabilities', () => {
    expect(spec.process.args.slice(0, 3)).toEqual(['/usr/bin/tini', '-s', '--']);
    expect(spec.process.noNewPrivileges).toBe(true);
    expect(spec.process.capabilities.bounding).toEqual(['CAP_AUDIT_WRITE', 'CAP_KILL', 'CAP_NET_BIND_SERVICE']);
  });

  it('has its own network namespace', () => {
    expect(spec.linux.namespaces).toContainEqual({ type: 'network' });
  });

  it('sets the environment, extra variables last', () => {
    expect(spec.process.env).toContain('HOME=/root');
    expect(spec.process.env).toContain('EXTRA=yes');
  });

  it('is pure', () => {
    expect(sandboxSpec(input)).toEqual(spec);
  });
});
