import { describe, expect, it } from 'vitest';
import { OutputLimit, stoppedByTimeout, timeoutPrefix } from './program.js';

describe('timeoutPrefix', () => {
  it('rounds the limit up to whole seconds, at least one', () => {
    expect(timeoutPrefix(120_000)).toEqual(['timeout', '--verbose', '--kill-after=2', '120']);
    expect(timeoutPrefix(1_500)).toEqual(['timeout', '--verbose', '--kill-after=2', '2']);
    expect(timeoutPrefix(10)).toEqual(['timeout', '--verbose', '--kill-after=2', '1']);
  });
});

describe('stoppedByTimeout', () => {
  it("tells timeout's stop from a program that exits 124 itself", () => {
    expect(stoppedByTimeout({ exitCode: 124, stderr: "partial\ntimeout: sending signal TERM to command 'python3'\n" })).toBe(true);
    expect(stoppedByTimeout({ exitCode: 137, stderr: "timeout: sending signal KILL to command 'bash'\n" })).toBe(true);
    expect(stoppedByTimeout({ exitCode: 124, stderr: 'my own error\n' })).toBe(false);
    expect(stoppedByTimeout({ exitCode: 1, stderr: "timeout: sending signal TERM to command 'x'\n" })).toBe(false);
  });
});

describe('OutputLimit', () => {
  it('keeps everything under the limit', () => {
    const output = new OutputLimit(10);
    output.push(Buffer.from('hello '));
    output.push(Buffer.from('you'));
    expect(output.text()).toBe('hello you');
  });

  it('cuts at the limit across chunks and says how much was dropped', () => {
    const output = new OutputLimit(8);
    output.push(Buffer.from('12345'));
    output.push(Buffer.from('67890'));
    output.push(Buffer.from('abc'));
    expect(output.text()).toBe('12345678\n[output truncated: 5 more bytes not shown]\n');
  });

  it('counts bytes dropped before they reached it (a launcher that caps output itself)', () => {
    const output = new OutputLimit(8);
    output.push(Buffer.from('12345678'));
    output.drop(3);
    output.drop(0);
    expect(output.text()).toBe('12345678\n[output truncated: 3 more bytes not shown]\n');
  });
});
