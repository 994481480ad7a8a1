/** The table a latency bench prints: each measure's p50 and p95 beside its floor's, and the p50 ratio. */

export function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export interface FloorRow {
  name: string;
  samples: number[];
  floorName: string;
  floor: number[];
}

/** Prints the title and the rows; the columns fit the longest names. */
export function printFloorTable(title: string, rows: FloorRow[]): void {
  const nameWidth = Math.max('measure'.length, ...rows.map((row) => row.name.length)) + 2;
  const floorWidth = Math.max('floor'.length, ...rows.map((row) => row.floorName.length)) + 2;
  const ms = (samples: number[], p: number) => percentile(samples, p).toFixed(1).padStart(9);
  console.log(`\n${title}`);
  console.log(`${'measure'.padEnd(nameWidth)}${'p50 ms'.padStart(9)}${'p95 ms'.padStart(9)}   ${'floor'.padEnd(floorWidth)}${'p50 ms'.padStart(9)}${'p95 ms'.padStart(9)}${'p50 ratio'.padStart(11)}`);
  for (const { name, samples, floorName, floor } of rows) {
    const ratio = `${(percentile(samples, 50) / percentile(floor, 50)).toFixed(2)}x`;
    console.log(`${name.padEnd(nameWidth)}${ms(samples, 50)}${ms(samples, 95)}   ${floorName.padEnd(floorWidth)}${ms(floor, 50)}${ms(floor, 95)}${ratio.padStart(11)}`);
  }
}

/** Runs a bench's main, and exits 1 with the error when it fails. */
export function runBench(main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
