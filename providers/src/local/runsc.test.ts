import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readStateFile } from './runsc.js';

describe('readStateFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-runsc-state-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  // The fields runsc writes besides these are left out; the reader takes only what it needs.
  const whole = JSON.stringify({ id: 'a', status: 'running', goferPid: 7, sandbox: { id: 'a', pid: 4242, uid: 0 } });

  it.each([
    ['a running container, with its sandbox process', whole, { status: 'running', pid: 4242 }],
    ['a stopped one without a sandbox process', JSON.stringify({ status: 'stopped', sandbox: { pid: 0 } }), { status: 'stopped' }],
    ['one without a sandbox', JSON.stringify({ status: 'created' }), { status: 'created' }],
    ['a file cut short while runsc rewrites it', whole.slice(0, 40), undefined],
    ['an empty file', '', undefined],
    ['a status runsc does not write', JSON.stringify({ status: 'sleeping', sandbox: { pid: 1 } }), undefined],
    ['a status that is not a string', JSON.stringify({ status: 2 }), undefined],
  ])('%s', async (_, text, expected) => {
    expect(await readStateFile(file(`${Math.random()}.state`, text))).toEqual(expected);
  });

  it('says gone when the file is not there', async () => {
    expect(await readStateFile(join(dir, 'missing.state'))).toBe('gone');
  });
});
