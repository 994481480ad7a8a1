/**
 * `helm package` of the chart: the archive a release pushes to an OCI registry
 * (`helm push dist/charts/berth-<version>.tgz oci://<registry>/<path>`). `make chart-package` and
 * CI run it as `npx tsx test/chart/package.ts [dir]` (default dist/charts); the chart tier checks
 * the archive it makes.
 */
import { execFile } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { clusterTools } from '../cluster/cluster.js';

const CHART = join(import.meta.dirname, '..', '..', 'charts', 'berth');

/** Packages the chart into `outDir` and returns the archive's path. */
export async function packageChart(outDir: string): Promise<string> {
  const { helm } = await clusterTools();
  await mkdir(outDir, { recursive: true });
  const stdout = await new Promise<string>((done, fail) =>
    execFile(helm, ['package', CHART, '--destination', outDir], (error, out, err) =>
      error ? fail(new Error(`helm package failed:\n${err}`)) : done(out),
    ),
  );
  // "Successfully packaged chart and saved it to: <path>"
  const match = /saved it to: (\S+\.tgz)/.exec(stdout);
  if (!match) throw new Error(`helm package printed no archive path:\n${stdout}`);
  return match[1]!;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const outDir = resolve(process.argv[2] ?? join(import.meta.dirname, '..', '..', 'dist', 'charts'));
  console.log(await packageChart(outDir));
}
