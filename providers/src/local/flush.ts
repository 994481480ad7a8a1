import { open, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { armChecked, runProcess, type ArmedStep, type RunResult, type SpareProcesses } from './process.js';

const LONGEST_MS = 10 * 60_000;

/**
 * Making a checkpoint kept on the host durable: a pause answers once the image is on disk, not in
 * the page cache, so that a host that loses power after the answer still has it.
 */

/** fsyncs every file and directory under `dir`, and `dir` itself. */
export async function flushTree(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  await Promise.all(entries.map((entry) => flushPath(join(entry.parentPath, entry.name))));
  await flushPath(dir);
}

/** fsyncs a directory, which makes the names created or renamed in it durable. */
export function flushDirectory(dir: string): Promise<void> {
  return flushPath(dir);
}

/** fsyncs one file. */
export function flushFile(path: string): Promise<void> {
  return flushPath(path);
}

async function flushPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Writes the filesystem mounted at `mountPoint` out to its device (for a loop mount, its image file). */
export async function syncFilesystem(mountPoint: string): Promise<void> {
  await run('sync', ['-f', mountPoint]);
}

/** A `syncFilesystem` armed (its process created, or taken from `spares`) to run later; see `armProcess`. */
export function armFilesystemSync(mountPoint: string, spares?: SpareProcesses): ArmedStep {
  return armChecked('sync', ['-f', mountPoint], { timeoutMs: LONGEST_MS, ...(spares ? { spares } : {}) }, (result) => succeeded('sync', ['-f', mountPoint], result));
}

/** Copies a filesystem image as a sparse file (or a reflink where the host's filesystem can). */
export async function copyImage(source: string, target: string): Promise<void> {
  await run('cp', ['--sparse=always', '--reflink=auto', source, target]);
}

async function run(command: string, args: string[]): Promise<void> {
  succeeded(command, args, await runProcess(command, args, { timeoutMs: LONGEST_MS }));
}

function succeeded(command: string, args: string[], result: RunResult): void {
  if (result.exitCode !== 0) throw new Error(`${command} ${args.join(' ')} failed (exit ${result.exitCode}): ${result.stderr.trim()}`);
}
