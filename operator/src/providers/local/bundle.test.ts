import { describe, expect, it } from 'vitest';
import { restoreSpec, sandboxSpec } from './bundle.js';
import { launcherArgs } from './launcher.js';

const input = {
  containerId: 'agt_1',
  image: 'python',
  compute: 'python' as const,
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

  it('runs the launcher as PID 1 without new privileges and with few capabilities', () => {
    expect(spec.process.args).toEqual(launcherArgs());
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

  it('says what image and compute it was made for', () => {
    expect(spec.annotations).toEqual({ 'berth.dev/image': 'python', 'berth.dev/compute': 'python' });
  });

  it('is pure', () => {
    expect(sandboxSpec(input)).toEqual(spec);
  });
});

describe('restoreSpec', () => {
  const saved = sandboxSpec(input);
  const place = { containerId: 'agt_2', workspace: '/data/sandboxes/agt_2/workspace', execDir: '/data/sandboxes/agt_2/exec' };
  const restored = restoreSpec(saved, place) as any;

  it("moves the host directories and the cgroup to the restored sandbox's", () => {
    expect(restored.mounts).toContainEqual({ destination: '/workspace', type: 'bind', source: place.workspace, options: ['rbind', 'rw'] });
    expect(restored.mounts).toContainEqual({ destination: '/run/berth/exec', type: 'bind', source: place.execDir, options: ['rbind', 'ro'] });
    expect(restored.linux.cgroupsPath).toBe('/berth/agt_2');
  });

  it('keeps everything else as the checkpointed sandbox ran it', () => {
    const { mounts, linux, ...rest } = restored;
    const { mounts: savedMounts, linux: savedLinux, ...savedRest } = saved as any;
    expect(rest).toEqual(savedRest);
    expect(mounts.filter((mount: any) => !['/workspace', '/run/berth/exec'].includes(mount.destination))).toEqual(
      savedMounts.filter((mount: any) => !['/workspace', '/run/berth/exec'].includes(mount.destination)),
    );
    expect(linux.resources).toEqual(savedLinux.resources);
  });

  it('leaves the saved spec alone', () => {
    expect(saved).toEqual(sandboxSpec(input));
  });
});
