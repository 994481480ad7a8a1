import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

/** The S3-compatible server the S3 storage tests run against: moto's, from PyPI. */
export const MOTO_VERSION = '5.2.5';

/** Kept outside the repository, like the sandbox images, so that a fresh clone reuses it. */
const VENV = process.env.BERTH_MOTO_VENV ??
  (process.getuid?.() === 0
    ? '/var/cache/berth/moto-venv'
    : join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'berth', 'moto-venv'));
/** Written last by an install, so a venv without it (or with another version) is not trusted. */
const MARKER = join(VENV, 'berth-moto-version');

const run = promisify(execFile);

/**
 * Makes sure the virtualenv holds moto[server] at MOTO_VERSION, installing it (about 40 s)
 * when it does not. The venv is built beside its final place and renamed into it, so that a
 * run killed half-way, or two test files installing at once, never leave a broken one.
 */
export async function ensureMoto(): Promise<string> {
  const python = join(VENV, 'bin', 'python');
  if (existsSync(MARKER) && readFileSync(MARKER, 'utf8').trim() === MOTO_VERSION) return python;
  await mkdir(dirname(VENV), { recursive: true });
  const building = `${VENV}.building-${process.pid}`;
  await rm(building, { recursive: true, force: true });
  try {
    await run('python3', ['-m', 'venv', building]);
    await run(join(building, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', `moto[server]==${MOTO_VERSION}`], {
      maxBuffer: 16 * 1024 ** 2,
    });
    await writeFile(join(building, 'berth-moto-version'), `${MOTO_VERSION}\n`);
    await rm(VENV, { recursive: true, force: true });
    await rename(building, VENV);
  } catch (error) {
    await rm(building, { recursive: true, force: true });
    // Another test file may have finished the same install first.
    if (existsSync(MARKER) && readFileSync(MARKER, 'utf8').trim() === MOTO_VERSION) return python;
    throw error;
  }
  return python;
}

export interface Moto {
  /** http://127.0.0.1:<port>, to give S3 clients with forcePathStyle. */
  endpoint: string;
  stop(): Promise<void>;
}

/** A moto server on a free port, answering before this returns. Every test file gets its own. */
export async function startMoto(): Promise<Moto> {
  const python = await ensureMoto();
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  // `python -m moto.server` is the moto_server script without its shebang, which names the
  // venv's path at install time and would break with the rename in ensureMoto.
  const server = spawn(python, ['-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = tailOf(server);
  // A test process that ends without running its afterAll (process.exit, a crash) takes moto along.
  const killOnExit = () => server.kill('SIGKILL');
  process.once('exit', killOnExit);
  server.once('exit', () => process.off('exit', killOnExit));
  try {
    await waitUntilAnswering(endpoint, server, output);
  } catch (error) {
    await stopProcess(server);
    throw error;
  }
  return { endpoint, stop: () => stopProcess(server) };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/**
 * The last few kilobytes of the server's output, for the error when it does not come up.
 * Reading the pipes also keeps moto from blocking on a full one (it logs every request).
 */
function tailOf(child: ChildProcess): () => string {
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-4096);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return () => tail;
}

async function waitUntilAnswering(endpoint: string, server: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (server.exitCode !== null || server.signalCode !== null) {
      throw new Error(`moto_server exited (${server.exitCode ?? server.signalCode}) before answering:\n${output()}`);
    }
    try {
      const response = await fetch(endpoint, { signal: AbortSignal.timeout(1_000) });
      await response.body?.cancel();
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`moto_server did not answer at ${endpoint} within 30 s:\n${output()}`);
}

/** SIGTERM, then SIGKILL if it lingers; resolves once the process is gone. */
async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(killer);
}
