/**
 * The closing line of `make test`: every tier's counts, from the files each wrote in the
 * results folder, added up. vitest's JSON report gives its tests; the fuzz tier and the bench
 * smoke write `{ passed, failed }` of their own (test/fuzz/run.ts, test/bench/smoke.sh).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Counts {
  passed: number;
  failed: number;
  skipped: number;
}

const dir = process.argv[2] ?? '.test-results';

function vitest(): Counts {
  const report = JSON.parse(readFileSync(join(dir, 'vitest.json'), 'utf8')) as {
    numPassedTests: number;
    numFailedTests: number;
    numPendingTests: number;
    numTodoTests: number;
  };
  return { passed: report.numPassedTests, failed: report.numFailedTests, skipped: report.numPendingTests + report.numTodoTests };
}

function own(name: string): Counts {
  const counts = JSON.parse(readFileSync(join(dir, name), 'utf8')) as { passed: number; failed: number };
  return { ...counts, skipped: 0 };
}

const tiers: [string, Counts][] = [['vitest', vitest()]];
for (const [tier, file] of [['fuzz', 'fuzz.json'], ['bench-smoke', 'bench.json']] as const) {
  if (!existsSync(join(dir, file))) throw new Error(`${tier} wrote no counts to ${join(dir, file)}: did it run?`);
  tiers.push([tier, own(file)]);
}
const line = (counts: Counts) => `${counts.passed} passed, ${counts.failed} failed${counts.skipped ? `, ${counts.skipped} skipped` : ''}`;
for (const [tier, counts] of tiers) console.log(`  ${tier}: ${line(counts)}`);
const total = tiers.reduce<Counts>(
  (sum, [, counts]) => ({ passed: sum.passed + counts.passed, failed: sum.failed + counts.failed, skipped: sum.skipped + counts.skipped }),
  { passed: 0, failed: 0, skipped: 0 },
);
console.log(`total: ${line(total)}`);
process.exitCode = total.failed > 0 ? 1 : 0;
