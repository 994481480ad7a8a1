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
      defaultProvider: 'local',
      defaultModel: 'openai/gpt-4o-mini',
    });
    expect(config.databaseUrl).toBeUndefined();
    expect(config.browserImage).toBeUndefined();
  });

  it('reads the environment, and flags win over it', () => {
    const config = loadConfig(
      { BERTH_PORT: '9000', BERTH_DATA_DIR: '/env', BERTH_SANDBOX_MEMORY: '512Mi', BERTH_EXEC_TIMEOUT: '2m' },
      { 'data-dir': '/flag' },
    );
    expect(config).toMatchObject({ port: 9000, dataDir: '/flag', sandboxMemory: 512 * 1024 ** 2, execTimeout: 120_000 });
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
    const lines = describeSettings();
    expect(lines).toHaveLength(Object.keys(SETTINGS).length);
    for (const setting of Object.values(SETTINGS)) expect(lines.join('\n')).toContain(setting.env);
  });
});
