import { spawnSync } from 'node:child_process';
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

  it('prints its version, and one command with the settings it reads for <command> --help', async () => {
    const version = await runBerth(['--version']);
    expect(version).toMatchObject({ code: 0, stdout: expect.stringMatching(/^\d+\.\d+\.\d+\n$/) });
    const keys = await runBerth(['keys', '--help']);
    expect(keys.code).toBe(0);
    expect(keys.stdout).toContain('berth keys revoke');
    expect(keys.stdout).toContain('DATABASE_URL');
    expect(keys.stdout).not.toContain('BERTH_S3_BUCKET');
    expect((await runBerth(['help', 'up'])).stdout).toContain('BERTH_S3_BUCKET');
    expect(await runBerth(['help', 'launch'])).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown command launch') });
  });

  it('aligns the columns of its help: every description starts in one column', async () => {
    const help = (await runBerth(['--help'])).stdout;
    const lines = help.slice(help.indexOf('Settings'), help.indexOf('Examples')).split('\n').slice(1).filter((line) => line.trim());
    const column = lines[0]!.indexOf(SETTINGS.port.description.slice(0, 12));
    expect(column).toBeGreaterThan(0);
    let rows = 0;
    for (const line of lines) {
      const setting = Object.values(SETTINGS).find((candidate) => line.slice(0, column).trim().split(/\s+/).includes(candidate.env));
      // A setting's row has its description at the column; the wrapped lines below it start there too.
      if (setting) rows++;
      expect(line.slice(column), line).toMatch(/^\S/);
      if (setting) expect(line.slice(column).slice(0, 16)).toBe(setting.description.slice(0, 16));
      else expect(line.slice(0, column).trim(), line).toBe('');
    }
    expect(rows).toBe(Object.keys(SETTINGS).length);
    for (const line of help.split('\n')) expect(line.length).toBeLessThanOrEqual(100);
  });

  it("runs the README's npx berth commands as written: this project's CLI, not a package of the same name", async () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const commands = [...readme.matchAll(/^npx berth ([^#\n`]+?)\s*(?:#.*)?$/gm)].map((match) => match[1]!);
    expect(commands).toEqual(expect.arrayContaining(['keys create --mode live --label backend', 'keys list']));
    const env = { ...process.env, DATABASE_URL: await createTestDatabase(), BERTH_LOG_LEVEL: 'warn', npm_config_yes: 'false' };
    const npx = (args: string): { code: number | null; stdout: string; stderr: string } => {
      const result = spawnSync('npx', ['berth', ...args.split(' ')], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 });
      return { code: result.status, stdout: result.stdout, stderr: result.stderr };
    };
    const help = npx('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('sandboxed compute for AI agents');
    let keyId = '';
    for (const command of commands.filter((command) => command.startsWith('keys'))) {
      const result = npx(command.replace(/key_01m80…/, keyId));
      expect(result, command).toMatchObject({ code: 0 });
      keyId ||= /created (key_[0-9a-z]+)/.exec(result.stdout)?.[1] ?? '';
    }
    expect(keyId).toMatch(/^key_/);
    expect(npx('keys list').stdout).toMatch(/revoked/);
  });

  it('has every setting in docs/configuration.md, the page the README links for them all', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('(docs/configuration.md)');
    const configuration = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');
    for (const setting of Object.values(SETTINGS)) {
      expect(configuration).toContain(`\`${setting.env}\``);
      if ('flag' in setting) expect(configuration).toContain(`\`--${setting.flag}\``);
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
