import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { createLogger } from '../../common/src/log.js';
import { startEmbeddedPostgres } from '../../apiserver/src/embedded/postgres.js';
import { startTestCluster } from '../cluster/cluster.js';
import { realNodeSupport } from '../node/node.js';
import { sandboxNodeImages } from '../node/sandbox-images.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Why this machine cannot run the real node, or '' when it runs. */
    realNodeUnavailable: string;
    /** `runsc --root <this> list` shows the node's gVisor sandboxes. */
    runscRoot: string;
    /** The node's containerd, for `ctr --address <this>` (importing images). */
    containerdSocket: string;
    /** The node's `ctr` binary. */
    ctr: string;
  }
}

const ROOT = join(import.meta.dirname, '..', '..');

/**
 * Once per node-tier run: build, one PostgreSQL server, and a control plane whose only node is a
 * real one (kubelet, containerd, gVisor), with Berth's CRDs and the gvisor RuntimeClass. The
 * operator and API server run as host processes against it (test/cluster-tier/helpers.ts); the
 * sandbox pods are real pods. Where realNodeSupport() says no (not root, no overlay filesystem,
 * or `runsc do` failing on this kernel), the tier reports that reason and its tests are skipped.
 */
export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const support = await realNodeSupport();
  if (!support.ok) {
    console.warn(`node tier: NOT RUN on this machine: ${support.reason}`);
    project.provide('realNodeUnavailable', support.reason);
    for (const key of ['databaseUrl', 'kubeconfig', 'kubectl', 'helm', 'clusterWorkspace', 'runscRoot', 'containerdSocket', 'ctr'] as const) project.provide(key, '');
    return undefined;
  }
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  const log = createLogger({ level: 'warn', name: 'node-setup' });
  const pgDir = mkdtempSync(join(tmpdir(), 'berth-node-pg-'));
  const postgres = await startEmbeddedPostgres(pgDir, log);
  const cluster = await startTestCluster({ nodes: 0, realNode: { images: await sandboxNodeImages(['python', 'node']) } });
  const apply = await cluster.kubectlRun(['apply', '-f', join(ROOT, 'crds', 'manifests')]);
  if (apply.code !== 0) throw new Error(`installing the CRDs failed: ${apply.stderr}`);
  const established = await cluster.kubectlRun(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
  if (established.code !== 0) throw new Error(`CRDs not established: ${established.stderr}`);
  const runtimeClass = await cluster.kubectlRun(
    ['apply', '-f', '-'],
    'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: gvisor\nhandler: runsc\n',
  );
  if (runtimeClass.code !== 0) throw new Error(`creating the RuntimeClass failed: ${runtimeClass.stderr}`);
  project.provide('realNodeUnavailable', '');
  project.provide('databaseUrl', postgres.connectionString);
  project.provide('kubeconfig', cluster.kubeconfig);
  project.provide('kubectl', cluster.kubectl);
  project.provide('helm', cluster.helm);
  project.provide('clusterWorkspace', cluster.workspace);
  project.provide('runscRoot', cluster.node!.runscRoot);
  project.provide('containerdSocket', cluster.node!.containerdSocket);
  project.provide('ctr', cluster.binaries.ctr!);
  return async () => {
    await cluster.stop();
    await postgres.stop();
    rmSync(pgDir, { recursive: true, force: true });
  };
}
