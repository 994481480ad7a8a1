import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SETTINGS } from '../../common/src/config.js';
import { ROOT, runBerth, startBerth, tempDir } from '../helpers/berth.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

describe('the berth command line', () => {
  it('lists every command and every setting in --help', async () => {
    const help = await runBerth(['--help']);
    expect(help.code).toBe(0);
    for (const command of ['berth up', 'berth keys create', 'berth keys list', 'berth keys revoke', 'berth images build']) {
      expect(help.stdout).toContain(command);
    }
    for (const setting of Object.values(SETTINGS)) {
      expect(help.stdout).toContain(setting.env);
      if ('flag' in setting) expect(help.stdout).toContain(`--${setting.flag}`);
    }
  });

  it('has every setting in the README', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    for (const setting of Object.values(SETTINGS)) {
      expect(readme).toContain(`\`${setting.env}\``);
      if ('flag' in setting) expect(readme).toContain(`\`--${setting.flag}\``);
    }
  });

  it('refuses unknown commands, flags and bad settings with a message and exit code 2', async () => {
    const unknown = await runBerth(['launch']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command launch');
    const flag = await runBerth(['up', '--prot', '80']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('--prot');
    const port = await runBerth(['up'], { BERTH_PORT: 'eighty' });
    expect(port.code).toBe(2);
    expect(port.stderr).toContain('--port / BERTH_PORT');
    const memory = await runBerth(['up'], { BERTH_SANDBOX_MEMORY: '12 bytes' });
    expect(memory.code).toBe(2);
    expect(memory.stderr).toContain('BERTH_SANDBOX_MEMORY');
  });

  it('takes its port and data directory from BERTH_PORT and BERTH_DATA_DIR as from --port and --data-dir', async () => {
    const port = await freePort();
    const dataDir = tempDir('berth-env-');
    const berth = await startBerth({
      dataDir,
      args: [],
      env: { BERTH_PORT: String(port), BERTH_DATA_DIR: dataDir, DATABASE_URL: await createTestDatabase() },
    });
    expect(berth.baseUrl).toBe(`http://127.0.0.1:${port}`);
    expect(berth.stdout()).toContain(`data directory  ${dataDir}`);
    expect((await berth.api(berth.liveKey).get('/v1/sessions')).status).toBe(200);
    expect(await berth.stop('SIGINT')).toBe(0);
    removeDataDir(dataDir);
  });
});
