/**
 * Runs a test cluster in the foreground until SIGTERM or SIGINT, then stops it: the process that
 * cluster.sh starts in the background (`npx tsx test/cluster/run.ts <dir>`). It writes its pid to
 * `<dir>/run.pid` for `cluster.sh down`: npx's shell does not pass signals on, so they must come
 * here directly. Once the nodes are Ready it writes `<dir>/env`, which cluster.sh waits for.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestCluster } from './cluster.js';

const dir = process.argv[2];
if (dir === undefined) throw new Error('usage: run.ts <dir>');

await writeFile(join(dir, 'run.pid'), `${process.pid}\n`);
const stopRequested = new Promise<NodeJS.Signals>((resolve) => {
  process.once('SIGTERM', resolve);
  process.once('SIGINT', resolve);
});
const cluster = await startTestCluster({ dir, log: (line) => console.log(line) });
await writeFile(
  join(dir, 'env'),
  [`export KUBECONFIG=${cluster.kubeconfig}`, `# kubectl: ${cluster.kubectl}`, `# helm: ${cluster.helm}`, ''].join('\n'),
);
console.log(`test cluster up at ${cluster.server}`);
console.log(`stopping on ${await stopRequested}`);
await cluster.stop();
