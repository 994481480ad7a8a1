import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { armFilesystemSync } from './flush.js';

describe('armFilesystemSync', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-flush-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('syncs the filesystem of the path when run', async () => {
    await expect(armFilesystemSync(dir).run()).resolves.toBeUndefined();
  });

  it('says why when the sync fails', async () => {
    await expect(armFilesystemSync(join(dir, 'missing')).run()).rejects.toThrow(/sync -f .*missing failed \(exit 1\)/);
  });

  it('is let go without syncing when cancelled, and a cancel after the run changes nothing', async () => {
    const armed = armFilesystemSync(dir);
    armed.cancel();
    armed.cancel();
    // Its process ended without the go-ahead: no `sync -f` ran (that would have exited 0).
    await expect(armed.run()).rejects.toThrow(/failed \(exit 1\)/);
    const ran = armFilesystemSync(dir);
    await ran.run();
    expect(() => ran.cancel()).not.toThrow();
  });
});
