import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { dollarsToNanocents, nanocentsToCents } from './money.js';
import { DEFAULT_COMPUTE_PRICES, computeNanocentsPerMinute, computeTotalNanocents, storageTotalNanocents } from './pricing.js';

describe('dollarsToNanocents', () => {
  it('turns decimal dollars into exact nanocents', () => {
    expect(dollarsToNanocents('1')).toBe(100_000_000_000n);
    expect(dollarsToNanocents('0.0010')).toBe(100_000_000n); // a tenth of a cent
    expect(dollarsToNanocents('0.00015')).toBe(15_000_000n);
    expect(dollarsToNanocents('0.00000000001')).toBe(1n);
  });

  it('refuses what is not an exact amount', () => {
    for (const bad of ['-1', '1e-3', '0.000000000001', 'one', '']) expect(() => dollarsToNanocents(bad), bad).toThrow(RangeError);
  });
});

describe('compute prices', () => {
  const prices = {
    ...DEFAULT_COMPUTE_PRICES,
    kubernetes: { python: '0.0030', gpu: { t4: '0.0500' } },
  };

  it('takes the compute type, or the browser price, plus the GPU type', () => {
    expect(computeNanocentsPerMinute(prices, { provider: 'local', compute: 'python', browser: false })).toBe(100_000_000n);
    expect(computeNanocentsPerMinute(prices, { provider: 'local', compute: 'go', browser: true })).toBe(200_000_000n);
    expect(computeNanocentsPerMinute(prices, { provider: 'local', compute: 'node', browser: false, gpu: 'a100' })).toBe(6_100_000_000n);
  });

  it("lets a provider's entry override the * entry, field by field", () => {
    expect(computeNanocentsPerMinute(prices, { provider: 'kubernetes', compute: 'python', browser: false })).toBe(300_000_000n);
    expect(computeNanocentsPerMinute(prices, { provider: 'kubernetes', compute: 'node', browser: false })).toBe(100_000_000n);
    expect(computeNanocentsPerMinute(prices, { provider: 'kubernetes', compute: 'python', browser: false, gpu: 't4' })).toBe(5_300_000_000n);
    expect(computeNanocentsPerMinute(prices, { provider: 'kubernetes', compute: 'python', browser: false, gpu: 'h100' })).toBe(10_300_000_000n);
  });

  it('charges unpriced compute nothing', () => {
    expect(computeNanocentsPerMinute({}, { provider: 'local', compute: 'python', browser: false, gpu: 'x' })).toBe(0n);
  });

  it('charges the difference of totals, so that any split of a lifetime sums to the same amount', () => {
    const perMinute = 100_000_007n; // an awkward price
    const whole = computeTotalNanocents(perMinute, 600_000);
    expect(whole).toBe(1_000_000_070n);
    let sum = 0n;
    let previous = 0;
    for (const at of [1, 999, 14_999, 60_001, 123_457, 599_999, 600_000]) {
      sum += computeTotalNanocents(perMinute, at) - computeTotalNanocents(perMinute, previous);
      previous = at;
    }
    expect(sum).toBe(whole);
  });

  it('prices storage per decimal GB-hour', () => {
    // 2 GB kept 3 hours at $0.00015 per GB-hour: $0.0009 = 0.09 cents.
    expect(storageTotalNanocents(dollarsToNanocents('0.00015'), 2_000_000_000, 3 * 3_600_000)).toBe(90_000_000n);
    expect(nanocentsToCents(storageTotalNanocents(dollarsToNanocents('0.00015'), 1_000_000_000, 720 * 3_600_000))).toBe(11);
  });
});

describe('pricing settings', () => {
  it('merges BERTH_COMPUTE_PRICES over the built-in * entry', () => {
    const config = loadConfig({
      BERTH_COMPUTE_PRICES: JSON.stringify({ '*': { python: '0.0020', gpu: { t4: '0.0150' } }, kubernetes: { go: '0.0040' } }),
      BERTH_STORAGE_PRICE: '0.0002',
    });
    expect(config.computePrices['*']).toEqual({ ...DEFAULT_COMPUTE_PRICES['*'], python: '0.0020', gpu: { ...DEFAULT_COMPUTE_PRICES['*']!.gpu, t4: '0.0150' } });
    expect(config.computePrices.kubernetes).toEqual({ go: '0.0040' });
    expect(config.storagePrice).toBe('0.0002');
    expect(config.meterInterval).toBe(15_000);
    expect(config.sessionCostStep).toBe(100);
  });

  it('refuses prices that are not decimal strings, naming the setting', () => {
    expect(() => loadConfig({ BERTH_COMPUTE_PRICES: JSON.stringify({ '*': { python: 0.001 } }) })).toThrow(/BERTH_COMPUTE_PRICES/);
    expect(() => loadConfig({ BERTH_COMPUTE_PRICES: JSON.stringify({ '*': { cobol: '1' } }) })).toThrow(/BERTH_COMPUTE_PRICES/);
    expect(() => loadConfig({ BERTH_STORAGE_PRICE: '-1' })).toThrow(/BERTH_STORAGE_PRICE/);
  });
});
