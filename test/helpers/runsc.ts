import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { eventually } from './http.js';

/** What runsc itself says about the sandboxes of a Berth data directory. */
export function runscContainers(dataDir: string): { id: string; status: string }[] {
  const output = execFileSync('runsc', [`--root=${join(dataDir, 'runsc')}`, 'list', '--format=json'], { encoding: 'utf8' });
  const containers = (JSON.parse(output || '[]') as { id: string; status: string }[] | null) ?? [];
  return containers.map(({ id, status }) => ({ id, status }));
}

/**
 * Waits for runsc to forget a checkpointed container. A pause answers once the checkpoint is on
 * disk and the sandbox has stopped (its compute released); the container's record is deleted just
 * after, in the background, so a test that looks at once may still see it, never running.
 */
export async function checkpointedContainerGone(dataDir: string, id: string): Promise<void> {
  const status = runscContainers(dataDir).find((container) => container.id === id)?.status;
  if (status === 'running') throw new Error(`container ${id} is still running after its checkpoint`);
  await eventually(async () => (runscContainers(dataDir).some((container) => container.id === id) ? undefined : true), { what: `runsc to delete container ${id}` });
}

/** Kills every sandbox of a data directory: tests clean up after themselves. */
export function killSandboxes(dataDir: string): void {
  for (const { id } of runscContainers(dataDir)) {
    try {
      execFileSync('runsc', [`--root=${join(dataDir, 'runsc')}`, 'delete', '--force', id], { stdio: 'ignore' });
    } catch {
      // already gone
    }
  }
}

/** What is mounted under `dir` (the sandboxes' workspace filesystems, runsc's network namespace), deepest first. */
export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => (line.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))))
    .filter((path) => path.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

/**
 * Removes a data directory after a test: its sandboxes, what is mounted under it (workspace
 * filesystems, the network namespace runsc pins under its state directory), then the files.
 */
export function removeDataDir(dataDir: string): void {
  killSandboxes(dataDir);
  for (const mount of mountsUnder(dataDir)) spawnSync('umount', [mount], { stdio: 'ignore' });
  rmSync(dataDir, { recursive: true, force: true });
}

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
