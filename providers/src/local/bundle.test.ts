import { describe, expect, it } from 'vitest';
import { hasChannel, hasEgress, restoreSpec, sandboxSpec, withoutSecretValues } from './bundle.js';
import { launcherArgs } from './launcher.js';

const input = {
  containerId: 'agt_1',
  image: 'python',
  compute: 'python' as const,
  rootfs: '/images/base/rootfs',
  workspace: '/data/sandboxes/agt_1/workspace',
  execDir: '/data/sandboxes/agt_1/exec',
  guestDir: '/opt/berth/sandbox-images/guest',
  channelDir: '/data/sandboxes/agt_1/channel',
  env: { EXTRA: 'yes' },
  cpus: 1.5,
  memoryBytes: 512 * 1024 ** 2,
  tmpBytes: 64 * 1024 ** 2,
};

describe('sandboxSpec', () => {
  const spec = sandboxSpec(input) as any;

  it('shares the image (runsc overlays it in memory) and mounts the workspace read-write', () => {
    expect(spec.root).toEqual({ path: '/images/base/rootfs', readonly: false });
    expect(spec.mounts).toContainEqual({ destination: '/workspace', type: 'bind', source: input.workspace, options: ['rbind', 'rw'] });
    expect(spec.mounts).toContainEqual({ destination: '/run/berth/exec', type: 'bind', source: input.execDir, options: ['rbind', 'ro'] });
    expect(spec.process.cwd).toBe('/workspace');
  });

  it('runs the launcher from the guest folder, mounted read-only', () => {
    expect(spec.mounts).toContainEqual({ destination: '/run/berth/guest', type: 'bind', source: input.guestDir, options: ['rbind', 'ro'] });
    expect(spec.process.args[3]).toBe('/run/berth/guest/launcher.py');
  });

  it("mounts the host's end of the launcher's channel read-only, and has none without a channel directory", () => {
    expect(spec.mounts).toContainEqual({ destination: '/run/berth/channel', type: 'bind', source: input.channelDir, options: ['rbind', 'ro'] });
    expect(hasChannel(spec)).toBe(true);
    const { channelDir: _, ...older } = input;
    expect(hasChannel(sandboxSpec(older))).toBe(false);
  });

  it('limits CPU, memory, the sentry threads on the host, and /tmp', () => {
    expect(spec.linux.resources).toEqual({
      memory: { limit: 512 * 1024 ** 2 },
      cpu: { quota: 150_000, period: 100_000 },
      pids: { limit: 512 },
    });
    expect(spec.mounts).toContainEqual({ destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777', 'size=67108864'] });
    expect(spec.mounts).toContainEqual(expect.objectContaining({ destination: '/sys/fs/cgroup', type: 'cgroup' }));
    expect(spec.linux.cgroupsPath).toBe('/berth/agt_1');
  });

  it('runs the launcher as PID 1 without new privileges and with few capabilities', () => {
    expect(spec.process.args).toEqual(launcherArgs(128));
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

  it('says what image and compute it was made for, and which variables hold secrets', () => {
    expect(spec.annotations).toEqual({ 'berth.dev/image': 'python', 'berth.dev/compute': 'python', 'berth.dev/secret-env': 'EXTRA' });
    expect(sandboxSpec({ ...input, env: {} }).annotations).toEqual({ 'berth.dev/image': 'python', 'berth.dev/compute': 'python' });
  });

  it('is pure', () => {
    expect(sandboxSpec(input)).toEqual(spec);
  });
});

describe('restoreSpec', () => {
  const saved = sandboxSpec(input);
  const place = { containerId: 'agt_2', workspace: '/data/sandboxes/agt_2/workspace', execDir: '/data/sandboxes/agt_2/exec', guestDir: '/srv/berth/guest', channelDir: '/data/sandboxes/agt_2/channel', env: { EXTRA: 'yes' } };
  const restored = restoreSpec(saved, place) as any;

  it("moves the host directories and the cgroup to the restored sandbox's", () => {
    expect(restored.mounts).toContainEqual({ destination: '/workspace', type: 'bind', source: place.workspace, options: ['rbind', 'rw'] });
    expect(restored.mounts).toContainEqual({ destination: '/run/berth/exec', type: 'bind', source: place.execDir, options: ['rbind', 'ro'] });
    expect(restored.mounts).toContainEqual({ destination: '/run/berth/guest', type: 'bind', source: place.guestDir, options: ['rbind', 'ro'] });
    expect(restored.mounts).toContainEqual({ destination: '/run/berth/channel', type: 'bind', source: place.channelDir, options: ['rbind', 'ro'] });
    expect(restored.linux.cgroupsPath).toBe('/berth/agt_2');
  });

  it('restores a sandbox checkpointed before the guest folder was mounted without one', () => {
    const old = structuredClone(saved) as any;
    old.mounts = old.mounts.filter((mount: any) => mount.destination !== '/run/berth/guest');
    expect((restoreSpec(old, place) as any).mounts.map((mount: any) => mount.destination)).not.toContain('/run/berth/guest');
  });

  it('restores a sandbox checkpointed before the channel without one: its execs go through runsc exec', () => {
    const old = structuredClone(saved) as any;
    old.mounts = old.mounts.filter((mount: any) => mount.destination !== '/run/berth/channel');
    expect(hasChannel(restoreSpec(old, place))).toBe(false);
  });

  it('keeps everything else as the checkpointed sandbox ran it', () => {
    const { mounts, linux, ...rest } = restored;
    const { mounts: savedMounts, linux: savedLinux, ...savedRest } = saved as any;
    expect(rest).toEqual(savedRest);
    expect(mounts.filter((mount: any) => !['/workspace', '/run/berth/exec', '/run/berth/guest', '/run/berth/channel'].includes(mount.destination))).toEqual(
      savedMounts.filter((mount: any) => !['/workspace', '/run/berth/exec', '/run/berth/guest', '/run/berth/channel'].includes(mount.destination)),
    );
    expect(linux.resources).toEqual(savedLinux.resources);
  });

  it('puts the current values of the secrets back into a spec saved without them', () => {
    const rotated = restoreSpec(withoutSecretValues(saved), { ...place, env: { EXTRA: 'rotated', OTHER: 'not named' } }) as any;
    expect(rotated.process.env).toContain('EXTRA=rotated');
    expect(rotated.process.env.filter((entry: string) => entry.startsWith('EXTRA='))).toHaveLength(1);
    expect(rotated.process.env.join('\n')).not.toContain('OTHER');
    const deleted = restoreSpec(withoutSecretValues(saved), { ...place, env: {} }) as any;
    expect(deleted.process.env.join('\n')).not.toContain('EXTRA');
  });

  it('leaves the saved spec alone', () => {
    expect(saved).toEqual(sandboxSpec(input));
  });
});

describe('withoutSecretValues', () => {
  it('drops the values of the named variables and keeps their names', () => {
    const saved = sandboxSpec({ ...input, env: { TOKEN: 'hunter2', EXTRA: 'yes' } }) as any;
    const redacted = withoutSecretValues(saved) as any;
    expect(JSON.stringify(redacted)).not.toContain('hunter2');
    expect(redacted.process.env).toContain('HOME=/root');
    expect(redacted.annotations['berth.dev/secret-env']).toBe('EXTRA,TOKEN');
    expect(saved.process.env).toContain('TOKEN=hunter2');
  });
});

describe('the egress path', () => {
  const withEgress = sandboxSpec({ ...input, egressDir: '/data/sandboxes/agt_1/egress' }) as any;

  it('mounts the egress folder read-only, has the launcher start the relay at its first connection and points clients at it', () => {
    expect(hasEgress(withEgress)).toBe(true);
    expect(hasEgress(sandboxSpec(input))).toBe(false);
    expect(withEgress.mounts).toContainEqual({ destination: '/run/berth/egress', type: 'bind', source: '/data/sandboxes/agt_1/egress', options: ['rbind', 'ro'] });
    expect(withEgress.process.args).toEqual([...launcherArgs().slice(0, 4), '--egress-relay', '128']);
    expect((sandboxSpec(input) as any).process.args).toEqual(launcherArgs(128));
    expect(withEgress.process.env).toEqual(
      expect.arrayContaining(['HTTPS_PROXY=http://127.0.0.1:3128', 'https_proxy=http://127.0.0.1:3128', 'SSL_CERT_FILE=/run/berth/egress/ca-bundle.pem', 'NODE_EXTRA_CA_CERTS=/run/berth/egress/ca.pem', 'EXTRA=yes']),
    );
    // The proxy settings are not secrets: a snapshot keeps them.
    expect(withEgress.annotations['berth.dev/secret-env']).toBe('EXTRA');
  });

  it("moves the egress folder to the restored sandbox's", () => {
    const place = { containerId: 'agt_2', workspace: '/w', execDir: '/e', guestDir: '/g', channelDir: '/c', egressDir: '/data/sandboxes/agt_2/egress', env: {} };
    expect((restoreSpec(withEgress, place) as any).mounts).toContainEqual({ destination: '/run/berth/egress', type: 'bind', source: place.egressDir, options: ['rbind', 'ro'] });
  });
});
