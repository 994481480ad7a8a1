/**
 * Money inside Berth: amounts are integer nanocents (1e-9 of a cent) from the price tables to
 * the ledger, so sums of many tiny charges are exact; they become integer cents only when
 * reported, by rounding the sum (half up), never each charge.
 */
export const NANOCENTS_PER_CENT = 1_000_000_000n;

/**
 * Dollars per million units, as a decimal string ("0.15", "2.50", "0.0375"), to nanocents per
 * unit: $1 per million is 100 cents / 1e6 = 1e-4 cent = 100,000 nanocents. Exact for up to
 * five decimal places; more would be a fraction of a nanocent, and is refused.
 */
export function dollarsPerMillionToNanocents(text: string): bigint {
  const match = /^(\d+)(?:\.(\d{1,5}))?$/.exec(text.trim());
  if (!match) throw new RangeError(`"${text}" is not a price in dollars with at most five decimal places`);
  const [, whole, fraction = ''] = match;
  return BigInt(whole!) * 100_000n + BigInt(fraction.padEnd(5, '0'));
}

/** Integer cents from nanocents, rounding half up. */
export function nanocentsToCents(nanocents: bigint): number {
  return Number((nanocents + NANOCENTS_PER_CENT / 2n) / NANOCENTS_PER_CENT);
}

/**
 * Dollars as a decimal string ("0.0010", "0.00015") to nanocents: $1 is 100 cents, 1e11
 * nanocents. Exact for up to eleven decimal places; more would be a fraction of a nanocent.
 */
export function dollarsToNanocents(text: string): bigint {
  const match = /^(\d+)(?:\.(\d{1,11}))?$/.exec(text.trim());
  if (!match) throw new RangeError(`"${text}" is not an amount in dollars with at most eleven decimal places`);
  const [, whole, fraction = ''] = match;
  return BigInt(whole!) * 100_000_000_000n + BigInt(fraction.padEnd(11, '0'));
}
