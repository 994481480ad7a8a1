import { describe, expect, it } from 'vitest';
import { ConfigError, describeSettings, loadConfig, SETTINGS } from './config.js';

describe('loadConfig', () => {
  it('has defaults for everything but the optional settings', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      sandboxNetwork: 'none',
      sandboxCpus: 1,
      sandboxMemory: 1024 ** 3,
      execTimeout: 120_000,
      defaultModel: 'openai/gpt-4o-mini',
    });
    expect(config.databaseUrl).toBeUndefined();
    expect(config.defaultProvider).toBeUndefined();
    expect(config.runtimeClass).toBe('gvisor');
    expect(config.gpuTable.a100).toEqual({
      nodeSelector: { 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB' },
      tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
      resource: 'nvidia.com/gpu',
      count: 1,
    });
    expect(config.browserImage).toBeUndefined();
  });

  it('places its directories from the environment it is given, as root in system directories', () => {
    const config = loadConfig({ XDG_DATA_HOME: '/xdg/data', XDG_CACHE_HOME: '/xdg/cache' });
    if (process.getuid?.() === 0) {
      expect([config.dataDir, config.imageDir]).toEqual(['/var/lib/berth', '/var/cache/berth/images']);
    } else {
      expect([config.dataDir, config.imageDir]).toEqual(['/xdg/data/berth', '/xdg/cache/berth/images']);
    }
  });

  it('reads the environment, and flags win over it', () => {
    const config = loadConfig(
      { BERTH_PORT: '9000', BERTH_DATA_DIR: '/env', BERTH_SANDBOX_MEMORY: '512Mi', BERTH_EXEC_TIMEOUT: '2m' },
      { 'data-dir': '/flag' },
    );
    expect(config).toMatchObject({ port: 9000, dataDir: '/flag', sandboxMemory: 512 * 1024 ** 2, execTimeout: 120_000 });
  });

  it('reads a GPU table from JSON, filling in defaults, and refuses a bad one', () => {
    const config = loadConfig({ BERTH_GPU_TABLE: '{"mi300":{"nodeSelector":{"amd.com/gpu.product":"MI300X"},"resource":"amd.com/gpu","count":2}}' });
    expect(config.gpuTable).toEqual({ mi300: { nodeSelector: { 'amd.com/gpu.product': 'MI300X' }, tolerations: [], resource: 'amd.com/gpu', count: 2 } });
    expect(() => loadConfig({ BERTH_GPU_TABLE: '{"x":{"count":0}}' })).toThrow(/BERTH_GPU_TABLE/);
    expect(() => loadConfig({ BERTH_GPU_TABLE: 'not json' })).toThrow(/BERTH_GPU_TABLE/);
  });

  it('turns runtime class "none" into no runtime class', () => {
    expect(loadConfig({ BERTH_RUNTIME_CLASS: 'none' }).runtimeClass).toBeUndefined();
  });

  it('treats an empty variable as unset', () => {
    expect(loadConfig({ BERTH_PORT: '' }).port).toBe(8080);
  });

  it('names every bad setting in one error', () => {
    let error: unknown;
    try {
      loadConfig({ BERTH_PORT: '99999', BERTH_SANDBOX_NETWORK: 'bridge', BERTH_EXEC_TIMEOUT: 'soon', DATABASE_URL: 'not a url' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    for (const name of ['--port / BERTH_PORT', 'BERTH_SANDBOX_NETWORK', 'BERTH_EXEC_TIMEOUT', 'DATABASE_URL']) expect(message).toContain(name);
  });

  it('describes every setting for --help', () => {
    const rows = describeSettings();
    expect(rows).toHaveLength(Object.keys(SETTINGS).length);
    expect(rows.map(([, env]) => env)).toEqual(Object.values(SETTINGS).map((setting) => setting.env));
    expect(describeSettings(['DATABASE_URL', 'BERTH_PORT']).map(([flag, env]) => [flag, env])).toEqual([
      ['--port <value>', 'BERTH_PORT'],
      ['--database-url <value>', 'DATABASE_URL'],
    ]);
  });
});

describe('egress settings', () => {
  it('reads the default allow-list into names and networks, and DNS servers', () => {
    const config = loadConfig({ BERTH_EGRESS_ALLOW: 'pypi.org, *.pythonhosted.org,10.1.0.0/16', BERTH_EGRESS_DNS_SERVERS: '10.0.0.2,10.0.0.3:5353' });
    expect(config.egressAllow).toEqual({ hosts: ['pypi.org', '*.pythonhosted.org'], cidrs: ['10.1.0.0/16'] });
    expect(config.egressDnsServers).toEqual(['10.0.0.2', '10.0.0.3:5353']);
    expect(loadConfig({}).egressAllow).toEqual({ hosts: [], cidrs: [] });
  });

  it('stops at an entry that is not a name, wildcard or network, naming the variable', () => {
    expect(() => loadConfig({ BERTH_EGRESS_ALLOW: 'pypi.org,Bad_Host' })).toThrow(/BERTH_EGRESS_ALLOW: "Bad_Host": must be a lowercase DNS name/);
    expect(() => loadConfig({ BERTH_EGRESS_ALLOW: '10.0.0.0/40' })).toThrow(/BERTH_EGRESS_ALLOW: "10.0.0.0\/40": the prefix length must be 0 to 32/);
  });
});
