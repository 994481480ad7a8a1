/**
 * Proves the real node works, end to end through the real API server: a gVisor pod of the
 * python sandbox image turns Running, `kubectl exec` runs python and bash in it (gVisor's dmesg),
 * and containerd lists its containers under the runsc runtime. `npx tsx test/node/smoke.ts` as
 * root; exits non-zero on failure.
 */
import { execSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTestCluster } from '../cluster/cluster.js';
import { realNodeSupport } from './node.js';
import { sandboxImageReference, sandboxNodeImages } from './sandbox-images.js';

const POD = `
apiVersion: v1
kind: Pod
metadata: {name: sandbox, namespace: default}
spec:
  runtimeClassName: gvisor
  securityContext: {runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000}
  containers:
  - name: sandbox
    image: ${sandboxImageReference('python')}
    imagePullPolicy: Never
`;

async function main(): Promise<void> {
  const support = await realNodeSupport();
  if (!support.ok) throw new Error(`no real node on this machine: ${support.reason}`);
  const started = Date.now();
  const cluster = await startTestCluster({ nodes: 0, realNode: { images: await sandboxNodeImages(['python']) }, log: (line) => console.log(`  ${line}`) });
  const kubectl = async (args: string[], input?: string) => {
    const result = await cluster.kubectlRun(args, input);
    if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${result.stderr}`);
    return result.stdout;
  };
  try {
    console.log(`cluster with a real node in ${Date.now() - started} ms`);
    await kubectl(['apply', '-f', '-'], 'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\n');
    const created = Date.now();
    await kubectl(['apply', '-f', '-'], POD);
    await kubectl(['wait', '--for=condition=Ready', '--timeout=60s', 'pod/sandbox']);
    console.log(`pod Ready in ${Date.now() - created} ms`);
    console.log('python:', (await kubectl(['exec', 'sandbox', '--', 'python3', '-c', 'import os; print(os.getuid(), os.getcwd())'])).trim());
    console.log('bash:', (await kubectl(['exec', 'sandbox', '--', 'bash', '-c', 'echo $HOME; dmesg | head -n 2'])).trim());
    console.log('runsc list:\n' + (await cluster.node!.ctr(['-n', 'k8s.io', 'containers', 'ls'])));
  } catch (error) {
    console.log((await cluster.kubectlRun(['describe', 'pod', 'sandbox'])).stdout);
    for (const log of ['kubelet', 'containerd']) {
      console.log(`--- ${log}.log`);
      console.log(readFileSync(join(cluster.dir, `${log}.log`), 'utf8').split('\n').filter((line) => /error|fail|RunPodSandbox|Container/i.test(line)).slice(-25).join('\n'));
    }
    console.log(execSync(`tail -n 20 ${join(cluster.dir, 'node', 'shim.log')} 2>&1; ps aux | grep -E 'runsc|shim' | grep -v grep | cut -c1-250`).toString());
    throw error;
  } finally {
    await cluster.stop();
  }
  console.log('node smoke: passed');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
