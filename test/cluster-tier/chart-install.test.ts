import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { ROOT } from '../helpers/berth.js';
import { createNamespace, kubectl, kubectlJson } from './helpers.js';

/** The chart installed with the real helm into the test cluster, its objects accepted by the API server. */
const CHART = join(ROOT, 'charts', 'berth');
const RELEASE = 'berth';
let namespace: string;

function helm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(inject('helm'), ['--kubeconfig', inject('kubeconfig'), ...args], { maxBuffer: 32 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  namespace = await createNamespace('chart');
});
afterAll(async () => {
  await helm(['uninstall', RELEASE, '-n', namespace]);
  await kubectl(['delete', 'namespace', namespace, '--wait=false']);
});

describe('helm install', () => {
  it('installs into the cluster (CRDs already present from crds/manifests) and every object is accepted', async () => {
    const installed = await helm([
      'install', RELEASE, CHART, '-n', namespace,
      '--set', 'postgresql.url=postgresql://berth:secret@postgres.invalid:5432/berth',
      '--set', 'crds.enabled=false',
    ]);
    expect(installed.stderr).toBe('');
    expect(installed.code).toBe(0);
    const status = await helm(['status', RELEASE, '-n', namespace, '-o', 'json']);
    expect(JSON.parse(status.stdout).info.status).toBe('deployed');
    const deployments = await kubectlJson(['get', 'deployments', '-n', namespace]);
    expect(deployments.items.map((item: any) => item.metadata.name).sort()).toEqual([`${RELEASE}-apiserver`, `${RELEASE}-operator`]);
    // One operator by default: its snapshots are in an emptyDir, which a second replica could not read.
    expect(deployments.items.find((item: any) => item.metadata.name === `${RELEASE}-operator`).spec.replicas).toBe(1);
    const policies = await kubectlJson(['get', 'networkpolicies', '-n', namespace]);
    expect(policies.items.map((item: any) => item.metadata.name).sort()).toEqual([`${RELEASE}-apiserver`, `${RELEASE}-operator`, `${RELEASE}-sandboxes`]);
  });

  it('gives each service account exactly the access its process needs', async () => {
    // `pods/exec` is a subresource: kubectl would read `pods/exec` as the pod named exec.
    const can = async (serviceAccount: string, verb: string, resource: string, where = namespace) => {
      const [type, subresource] = resource.split('/');
      const args = ['auth', 'can-i', verb, type!, '-n', where, `--as=system:serviceaccount:${namespace}:${serviceAccount}`];
      if (subresource) args.push(`--subresource=${subresource}`);
      return `${verb} ${resource}: ${(await kubectl(args)).stdout.trim()}`;
    };
    const operator = `${RELEASE}-operator`;
    const apiserver = `${RELEASE}-apiserver`;
    expect(await can(operator, 'create', 'pods')).toBe('create pods: yes');
    expect(await can(operator, 'create', 'pods/exec')).toBe('create pods/exec: yes');
    expect(await can(operator, 'update', 'agents.berth.dev/status')).toBe('update agents.berth.dev/status: yes');
    expect(await can(operator, 'create', 'leases.coordination.k8s.io')).toBe('create leases.coordination.k8s.io: yes');
    expect(await can(apiserver, 'create', 'agents.berth.dev')).toBe('create agents.berth.dev: yes');
    expect(await can(apiserver, 'create', 'pods/exec')).toBe('create pods/exec: yes');
    expect(await can(apiserver, 'create', 'pods')).toBe('create pods: no');
    expect(await can(apiserver, 'create', 'leases.coordination.k8s.io')).toBe('create leases.coordination.k8s.io: no');
    expect(await can(operator, 'list', 'secrets')).toBe('list secrets: no');
    expect(await can(operator, 'create', 'pods', 'kube-system')).toBe('create pods: no');
  });

  it("renders CRDs the API server accepts as they are (server-side dry run of the chart's CRD templates)", async () => {
    const rendered = await helm(['template', RELEASE, CHART, '-n', namespace, '--set', 'postgresql.url=postgresql://x@y/z', '--show-only', 'templates/crds/agents.yaml']);
    expect(rendered.code, rendered.stderr).toBe(0);
    const dryRun = await kubectl(['apply', '--dry-run=server', '--server-side', '--force-conflicts', '-f', '-'], rendered.stdout);
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toContain('agents.berth.dev');
  });

  it('upgrades and uninstalls cleanly', async () => {
    const upgraded = await helm(['upgrade', RELEASE, CHART, '-n', namespace, '--reuse-values', '--set', 'apiserver.replicas=3']);
    expect(upgraded.code, upgraded.stderr).toBe(0);
    const deployment = await kubectlJson(['get', 'deployment', `${RELEASE}-apiserver`, '-n', namespace]);
    expect(deployment.spec.replicas).toBe(3);
  });
});
