import { describe, expect, it } from 'vitest';
import { headroomFor, parseStat } from './memory.js';

const MiB = 1024 ** 2;

describe('parseStat', () => {
  it.each([
    ['a running program', '173 (python3) R 1 173 173 0 0 0 0 0 0 0 10 1 0 0 20 0 1 0 5 600000000 134486 18446744073709551615 0 0', { command: 'python3', residentBytes: 134486 * 4096 }],
    ['a command with spaces and parentheses', '9 (a (b) c) S 1 9 9 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 5 1000 7 0', { command: 'a (b) c', residentBytes: 7 * 4096 }],
    ['a zombie', '12 (sleep) Z 1 12 12 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0', undefined],
    ['no stat at all', 'garbage', undefined],
  ])('%s', (_, stat, expected) => {
    expect(parseStat(stat)).toEqual(expected);
  });
});

describe('headroomFor', () => {
  it.each([
    [64 * MiB, 64 * MiB],
    [512 * MiB, 256 * MiB],
    [1024 * MiB, 512 * MiB],
  ])('a limit of %d bytes gets %d', (limit, headroom) => {
    expect(headroomFor(limit)).toBe(headroom);
  });
});
