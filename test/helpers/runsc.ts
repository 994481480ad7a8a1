import { execFileSync, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';

/** What runsc itself says about the sandboxes of a Berth data directory. */
export function runscContainers(dataDir: string): { id: string; status: string }[] {
  const output = execFileSync('runsc', [`--root=${join(dataDir, 'runsc')}`, 'list', '--format=json'], { encoding: 'utf8' });
  const containers = (JSON.parse(output || '[]') as { id: string; status: string }[] | null) ?? [];
  return containers.map(({ id, status }) => ({ id, status }));
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

/**
 * Removes a data directory after a test: its sandboxes, the network namespace runsc pins
 * under its state directory (a mount), then the files.
 */
export function removeDataDir(dataDir: string): void {
  killSandboxes(dataDir);
  spawnSync('umount', [join(dataDir, 'runsc', 'null-netns')], { stdio: 'ignore' });
  rmSync(dataDir, { recursive: true, force: true });
}
