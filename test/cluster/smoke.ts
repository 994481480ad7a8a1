/**
 * Proves that the test cluster does what the cluster-tier tests rely on, end to end through the
 * real API server: `cd /work/main && npx tsx test/cluster/smoke.ts`. Exits non-zero on failure.
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { startTestCluster, type TestCluster } from './cluster.js';

const NAMESPACE = 'smoke';

// A pod as the operator would write it: the fake nodes are untainted, so it needs neither a
// toleration nor a node selector to land on one.
const POD = `
apiVersion: v1
kind: Pod
metadata:
  name: sandbox
spec:
  containers:
  - name: main
    image: busybox
    command: [sleep, infinity]
`;

async function main(): Promise<void> {
  const cluster = await phase('start cluster', () => startTestCluster({ log: (line) => console.log(`  ${line}`) }));
  try {
    await phase('create namespace', () => kubectl(cluster, ['create', 'namespace', NAMESPACE]));
    await phase('pod Running on a fake node', () => podRuns(cluster));
    await phase('exec through the API server', () => execReportsStreamsAndExitCode(cluster));
    await phase('owner-reference garbage collection', () => dependentIsCollected(cluster));
  } finally {
    await phase('stop cluster', () => cluster.stop());
  }
  check(!existsSync(cluster.dir), `${cluster.dir} was not removed`);
  const leftovers = processesMentioning(cluster.dir);
  check(leftovers.length === 0, `processes left running: ${leftovers.join('; ')}`);
  console.log('smoke: 1 passed, 0 failed');
}

async function podRuns(cluster: TestCluster): Promise<void> {
  await kubectl(cluster, ['apply', '-n', NAMESPACE, '-f', '-'], POD);
  await kubectl(cluster, ['wait', '-n', NAMESPACE, 'pod/sandbox', '--for=jsonpath={.status.phase}=Running', '--timeout=60s']);
  const node = await kubectl(cluster, ['get', '-n', NAMESPACE, 'pod/sandbox', '-o', 'jsonpath={.spec.nodeName}']);
  check(node.startsWith('kwok-node-'), `pod landed on ${JSON.stringify(node)}`);
}

async function execReportsStreamsAndExitCode(cluster: TestCluster): Promise<void> {
  const result = await cluster.kubectlRun(['exec', '-n', NAMESPACE, 'sandbox', '--', 'sh', '-c', 'echo hello; echo err >&2; exit 3']);
  const summary = JSON.stringify(result);
  check(result.stdout === 'hello\n', `exec stdout: ${summary}`);
  // kubectl adds its own "command terminated with exit code 3" line after the command's stderr.
  check(result.stderr.split('\n')[0] === 'err', `exec stderr: ${summary}`);
  check(result.code === 3, `exec exit code: ${summary}`);
}

async function dependentIsCollected(cluster: TestCluster): Promise<void> {
  await kubectl(cluster, ['create', 'configmap', '-n', NAMESPACE, 'owner']);
  const uid = await kubectl(cluster, ['get', 'configmap', '-n', NAMESPACE, 'owner', '-o', 'jsonpath={.metadata.uid}']);
  const dependent = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'dependent', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid }] },
  };
  await kubectl(cluster, ['apply', '-n', NAMESPACE, '-f', '-'], JSON.stringify(dependent));
  await kubectl(cluster, ['delete', 'configmap', '-n', NAMESPACE, 'owner']);
  await kubectl(cluster, ['wait', '-n', NAMESPACE, 'configmap/dependent', '--for=delete', '--timeout=60s']);
}

async function kubectl(cluster: TestCluster, args: string[], input?: string): Promise<string> {
  const result = await cluster.kubectlRun(args, input);
  if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited with ${result.code}: ${result.stderr}`);
  return result.stdout;
}

async function phase<T>(name: string, run: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const result = await run();
  console.log(`${name}: ${Math.round(performance.now() - started)} ms`);
  return result;
}

function check(condition: boolean, message: string): void {
  if (!condition) throw new Error(message);
}

/** Every cluster process names a file in the working directory on its command line. */
function processesMentioning(text: string): string[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((pid) => {
      try {
        const commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
        return commandLine.includes(text) ? [`${pid}: ${commandLine.slice(0, 120)}`] : [];
      } catch {
        return []; // exited while we looked
      }
    });
}

main().catch((error: unknown) => {
  console.error(error);
  console.log('smoke: 0 passed, 1 failed');
  process.exitCode = 1;
});
