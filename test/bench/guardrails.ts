/**
 * `make bench` (guardrails): what screening one tool result costs the agent loop, beside a floor
 * measured in the same run on the same text:
 *
 *   all rules      pii (every kind), promptInjection, denyList (20 terms), maxOutputChars on a
 *                  16 KiB tool result (the most the model reads of one), as the loop screens it
 *   pii only       the four PII detectors
 *   floor          one case-insensitive regular-expression scan of the same text (the least a
 *                  check that reads the whole text costs)
 *
 * Texts: plain log lines, and the same with an email, a card number and a key every 2 KiB.
 */
import { guardrailsSchema, screenText } from '../../common/src/guardrails.js';
import { percentile } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 500);

function logText(withPii: boolean): string {
  let text = '';
  for (let line = 0; text.length < 16 * 1024; line++) {
    text += `2026-11-23T16:00:${String(line % 60).padStart(2, '0')}Z INFO worker ${line}: processed batch of 128 rows in 41 ms\n`;
    if (withPii && line % 25 === 0) text += 'contact ada@example.com card 4111 1111 1111 1111 key sk-proj-abcdefghijklmnopqrstuvwx\n';
  }
  return text.slice(0, 16 * 1024);
}

const all = guardrailsSchema.parse({
  pii: { action: 'redact' },
  promptInjection: { action: 'flag' },
  denyList: { action: 'flag', terms: Array.from({ length: 20 }, (_, i) => `codename-${i}`) },
  maxOutputChars: { chars: 100_000, action: 'block' },
});
const piiOnly = guardrailsSchema.parse({ pii: { action: 'redact' } });

function timed(run: () => unknown): number {
  const started = performance.now();
  run();
  return performance.now() - started;
}

for (const [label, text] of [['plain log', logText(false)], ['log with PII', logText(true)]] as const) {
  const measures: [string, () => unknown][] = [
    ['floor', () => /timeout|panic/gi.exec(text)],
    ['all rules', () => screenText(all, text, 'input', 'tool:exec')],
    ['pii only', () => screenText(piiOnly, text, 'input', 'tool:exec')],
  ];
  const samples = new Map<string, number[]>(measures.map(([name]) => [name, []]));
  for (const [, run] of measures) for (let i = 0; i < 20; i++) run();
  for (let i = 0; i < RUNS; i++) for (const [name, run] of measures) samples.get(name)!.push(timed(run));
  const p50 = (name: string) => percentile(samples.get(name)!, 50);
  console.log(`\nguardrails on a 16 KiB tool result (${label}), ${RUNS} runs each (floor measured in the same run)`);
  console.log(`${'measure'.padEnd(12)}${'p50 ms'.padStart(9)}${'p95 ms'.padStart(9)}${'floor p50 ms'.padStart(14)}${'p50 ratio'.padStart(11)}`);
  for (const name of ['all rules', 'pii only']) {
    console.log(
      `${name.padEnd(12)}${p50(name).toFixed(3).padStart(9)}${percentile(samples.get(name)!, 95).toFixed(3).padStart(9)}${p50('floor').toFixed(3).padStart(14)}${`${(p50(name) / p50('floor')).toFixed(1)}x`.padStart(11)}`,
    );
  }
}
