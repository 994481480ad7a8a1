import { describe, expect, it } from 'vitest';
import { OutputLimit } from './program.js';

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

  it('keeps the last bytes of the stream past the limit', () => {
    const output = new OutputLimit(4);
    output.push(Buffer.from('x'.repeat(10_000)));
    output.push(Buffer.from('\nthe end\n'));
    expect(output.text()).toBe('xxxx\n[output truncated: 10005 more bytes not shown]\n');
    expect(output.tail()).toHaveLength(4096);
    expect(output.tail().endsWith('x\nthe end\n')).toBe(true);
  });

  it('counts bytes dropped before they reached it (a launcher that caps output itself)', () => {
    const output = new OutputLimit(8);
    output.push(Buffer.from('12345678'));
    output.drop(3);
    output.drop(0);
    expect(output.text()).toBe('12345678\n[output truncated: 3 more bytes not shown]\n');
  });
});
