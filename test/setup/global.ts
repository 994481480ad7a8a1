import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { createLogger } from '../../common/src/log.js';
import { loadConfig } from '../../common/src/config.js';
import { ImageStore } from '../../providers/src/local/images.js';
import { startEmbeddedPostgres } from '../../apiserver/src/embedded/postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

const ROOT = join(import.meta.dirname, '..', '..');

/**
 * Once per integration run: build the code the spawned `berth` processes run, make sure
 * gVisor and the sandbox images are there, and start one real PostgreSQL server that each
 * test file gets its own database on.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  const log = createLogger({ level: 'warn', name: 'test-setup' });
  const config = loadConfig({});
  execFileSync(config.runsc, ['--version'], { stdio: 'ignore' });
  const images = new ImageStore(config.imageDir, log);
  for (const image of ['python', 'node', 'go'] as const) await images.ensure(image);

  const dir = mkdtempSync(join(tmpdir(), 'berth-test-pg-'));
  const postgres = await startEmbeddedPostgres(dir, log);
  project.provide('databaseUrl', postgres.connectionString);
  return async () => {
    await postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
