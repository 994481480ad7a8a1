import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startTestCluster } from '../cluster/cluster.js';
import { RESTORES, RUNSC } from './node.js';
import { sandboxImageReference, sandboxNodeImages } from './sandbox-images.js';

const pod = (gated: boolean) => `
apiVersion: v1
kind: Pod
metadata: {name: counter, namespace: default}
spec:
  runtimeClassName: gvisor
  restartPolicy: Never
  ${gated ? 'schedulingGates: [{name: berth.dev/restore}]' : ''}
  securityContext: {runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}
  containers:
  - name: sandbox
    image: ${sandboxImageReference('python')}
    imagePullPolicy: Never
    workingDir: /workspace
    command: ["python3", "-c", "import time\\nn=0\\nwhile True:\\n  n+=1\\n  open('/workspace/n','w').write(str(n))\\n  time.sleep(0.1)"]
    volumeMounts: [{name: workspace, mountPath: /workspace}, {name: tmp, mountPath: /tmp}]
  volumes: [{name: workspace, emptyDir: {}}, {name: tmp, emptyDir: {}}]
`;

async function main() {
  const cluster = await startTestCluster({ nodes: 0, realNode: { images: await sandboxNodeImages(['python']) }, log: (l) => console.log(' ', l) });
  const k = async (args: string[], input?: string) => {
    const r = await cluster.kubectlRun(args, input);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const root = cluster.node!.runscRoot;
  const runsc = (args: string[]) => execFileSync(RUNSC, [`--root=${root}`, ...args]).toString();
  try {
    await k(['apply', '-f', '-'], 'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\n');
    await k(['apply', '-f', '-'], pod(false));
    await k(['wait', '--for=condition=Ready', '--timeout=90s', 'pod/counter']);
    await new Promise((r) => setTimeout(r, 1500));
    const p = JSON.parse(await k(['get', 'pod', 'counter', '-o', 'json']));
    const cid = p.status.containerStatuses[0].containerID.replace('containerd://', '');
    const state = JSON.parse(runsc(['state', cid]));
    const sandboxId = state.annotations['io.kubernetes.cri.sandbox-id'];
    console.log('before', await k(['exec', 'counter', '--', 'cat', '/workspace/n']));
    const image = '/tmp/berth-exp/image';
    rmSync(image, { recursive: true, force: true });
    mkdirSync(image, { recursive: true });
    let t = Date.now();
    runsc(['checkpoint', `--image-path=${image}`, sandboxId]);
    console.log('checkpoint ms', Date.now() - t);
    const ws = join(cluster.dir, 'node', 'kubelet', 'pods', p.metadata.uid, 'volumes', 'kubernetes.io~empty-dir', 'workspace');
    execFileSync('tar', ['-c', '-f', '/tmp/berth-exp/workspace.tar', '-C', ws, '.']);
    console.log('at checkpoint n =', execFileSync('cat', [join(ws, 'n')]).toString());
    await k(['delete', 'pod', 'counter', '--grace-period=0', '--force']).catch((e) => console.log(String(e)));
    await k(['wait', '--for=delete', '--timeout=60s', 'pod/counter']).catch(() => '');
    await k(['apply', '-f', '-'], pod(true));
    const uid = JSON.parse(await k(['get', 'pod', 'counter', '-o', 'json'])).metadata.uid;
    const staged = join(RESTORES, uid);
    cpSync(image, join(staged, 'image'), { recursive: true });
    cpSync('/tmp/berth-exp/workspace.tar', join(staged, 'workspace.tar'));
    writeFileSync(join(staged, 'ready'), '');
    t = Date.now();
    await k(['patch', 'pod', 'counter', '--type=json', '-p', '[{"op":"remove","path":"/spec/schedulingGates"}]']);
    await k(['wait', '--for=condition=Ready', '--timeout=90s', 'pod/counter']);
    console.log('restore → Ready ms', Date.now() - t);
    console.log('after', await k(['exec', 'counter', '--', 'cat', '/workspace/n']));
    await new Promise((r) => setTimeout(r, 1000));
    console.log('after 1s', await k(['exec', 'counter', '--', 'sh', '-c', 'cat /workspace/n; echo; ps aux']));
  } catch (error) {
    console.log(String(error));
    console.log((await cluster.kubectlRun(['describe', 'pod', 'counter'])).stdout.split('\n').slice(-15).join('\n'));
    console.log(execFileSync('sh', ['-c', `grep -i -E "restore|error" ${join(cluster.dir, 'node', 'shim.log')} | tail -n 30; tail -n 20 ${join(cluster.dir, 'containerd.log')}`]).toString());
  } finally {
    await cluster.stop();
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
