import { describe, expect, it } from 'vitest';
import { dollarsPerMillionToNanocents, nanocentsToCents } from './money.js';

describe('dollarsPerMillionToNanocents', () => {
  it.each([
    ['1', 100_000n],
    ['0.15', 15_000n],
    ['2.50', 250_000n],
    ['0.0375', 3_750n],
    ['0.00001', 1n],
    ['15', 1_500_000n],
    ['0', 0n],
  ])('$%s per million units is %i nanocents per unit', (text, nanocents) => {
    expect(dollarsPerMillionToNanocents(text)).toBe(nanocents);
  });

  it.each(['', '-1', '1e3', '0.000001', 'abc', '1.'])('refuses %j', (text) => {
    expect(() => dollarsPerMillionToNanocents(text)).toThrow(RangeError);
  });
});

describe('nanocentsToCents', () => {
  it('rounds half up', () => {
    expect(nanocentsToCents(0n)).toBe(0);
    expect(nanocentsToCents(499_999_999n)).toBe(0);
    expect(nanocentsToCents(500_000_000n)).toBe(1);
    expect(nanocentsToCents(1_499_999_999n)).toBe(1);
  });

  it('loses nothing over many tiny charges: a million calls of 7 tokens at $0.15/M are 105 cents', () => {
    const perToken = dollarsPerMillionToNanocents('0.15');
    let total = 0n;
    for (let i = 0; i < 1_000_000; i++) total += 7n * perToken;
    expect(nanocentsToCents(total)).toBe(105);
  });
});
