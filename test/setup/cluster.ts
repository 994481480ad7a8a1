import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { createLogger } from '../../common/src/log.js';
import { startEmbeddedPostgres } from '../../apiserver/src/embedded/postgres.js';
import { startTestCluster } from '../cluster/cluster.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    kubeconfig: string;
    kubectl: string;
    helm: string;
    clusterWorkspace: string;
  }
}

const ROOT = join(import.meta.dirname, '..', '..');

/**
 * Once per cluster-tier run: build, start one PostgreSQL server and one control plane (etcd,
 * kube-apiserver, scheduler, controller-manager, KWOK nodes), install Berth's CRDs and the
 * gvisor RuntimeClass the sandbox pods name. Each test file works in its own namespace.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  const log = createLogger({ level: 'warn', name: 'cluster-setup' });
  const pgDir = mkdtempSync(join(tmpdir(), 'berth-cluster-pg-'));
  const postgres = await startEmbeddedPostgres(pgDir, log);
  const cluster = await startTestCluster({ nodes: 3 });
  const apply = await cluster.kubectlRun(['apply', '-f', join(ROOT, 'crds', 'manifests')]);
  if (apply.code !== 0) throw new Error(`installing the CRDs failed: ${apply.stderr}`);
  const established = await cluster.kubectlRun(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
  if (established.code !== 0) throw new Error(`CRDs not established: ${established.stderr}`);
  const runtimeClass = await cluster.kubectlRun(
    ['apply', '-f', '-'],
    'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: gvisor\nhandler: runsc\n',
  );
  if (runtimeClass.code !== 0) throw new Error(`creating the RuntimeClass failed: ${runtimeClass.stderr}`);
  project.provide('databaseUrl', postgres.connectionString);
  project.provide('kubeconfig', cluster.kubeconfig);
  project.provide('kubectl', cluster.kubectl);
  project.provide('helm', cluster.helm);
  project.provide('clusterWorkspace', cluster.workspace);
  return async () => {
    await cluster.stop();
    await postgres.stop();
    rmSync(pgDir, { recursive: true, force: true });
  };
}
