/**
 * The rendered chart validated against the schemas of a real kube-apiserver: a server-side dry run
 * (`kubectl apply --dry-run=server`) of every object `helm template` renders, for several values
 * combinations. The API server of the test control plane (test/cluster) checks each object with
 * the same OpenAPI schemas, defaulting and validation it applies to a real install, including the
 * chart's own CRDs and the Prometheus Operator's ServiceMonitor CRD, installed from its Go module.
 * Nothing is created: the dry run stops before storage, so no node or container is needed.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCluster, type TestCluster } from '../cluster/cluster.js';
import { CHART, NAMESPACE, RELEASE, run, WITH_URL } from './helm.js';

const SANDBOX_NAMESPACE = 'berth-sandboxes';
const CI = join(CHART, 'ci');

let cluster: TestCluster;

function monitoringCrd(): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', [join(import.meta.dirname, 'monitoring-crds.sh')], (error, stdout, stderr) =>
      error ? reject(new Error(`monitoring-crds.sh failed:\n${stderr}`)) : resolve(stdout.trim()),
    );
  });
}

beforeAll(async () => {
  const [started, crd] = await Promise.all([startTestCluster({ nodes: 0 }), monitoringCrd()]);
  cluster = started;
  const installed = await cluster.kubectlRun(['apply', '--server-side', '-f', crd]);
  expect(installed.code, installed.stderr).toBe(0);
  // `kubectl wait` fails while the CRD has no conditions yet, so poll for Established.
  const established = () =>
    cluster.kubectlRun(['get', 'crd', 'servicemonitors.monitoring.coreos.com', '-o', 'jsonpath={.status.conditions[?(@.type=="Established")].status}']);
  for (let attempt = 0; (await established()).stdout !== 'True'; attempt++) {
    if (attempt === 300) throw new Error('the ServiceMonitor CRD did not become Established');
    await sleep(100);
  }
  for (const namespace of [NAMESPACE, SANDBOX_NAMESPACE]) {
    const created = await cluster.kubectlRun(['create', 'namespace', namespace]);
    expect(created.code, created.stderr).toBe(0);
  }
}, 600_000);

afterAll(async () => {
  await cluster?.stop();
});

/** `helm template` with these values, then a server-side dry run of everything it rendered. */
async function dryRun(args: string[]): Promise<{ code: number; stdout: string; stderr: string; kinds: string[] }> {
  const rendered = await run(['template', RELEASE, CHART, '--namespace', NAMESPACE, ...args]);
  expect(rendered.code, rendered.stderr).toBe(0);
  const kinds = [...rendered.stdout.matchAll(/^kind: (\w+)$/gm)].map((match) => match[1]!);
  const result = await cluster.kubectlRun(['apply', '--dry-run=server', '--server-side', '--field-manager=helm', '-f', '-'], rendered.stdout);
  return { ...result, kinds };
}

/** The "kind/name serverside-applied (server dry run)" lines, one per object. */
function applied(stdout: string): string[] {
  return stdout
    .split('\n')
    .filter((line) => line.endsWith('(server dry run)'))
    .map((line) => line.split(' ')[0]!);
}

describe('the API server accepts every rendered object', () => {
  const combinations: [string, string[]][] = [
    ['the defaults with a database URL', WITH_URL],
    ['the bundled database, every optional object and a separate sandbox namespace', ['--values', join(CI, 'bundled-values.yaml')]],
    ['a production-like install with every option set', ['--values', join(CI, 'production-values.yaml')]],
    ['a GitOps install with the bundled database and Secrets made once', ['--values', join(CI, 'gitops-values.yaml')]],
  ];

  for (const [what, args] of combinations) {
    it(what, async () => {
      const result = await dryRun(args);
      expect(result.code, result.stderr).toBe(0);
      const objects = applied(result.stdout);
      // Every rendered object was checked, not only the first ones before an error.
      expect(objects).toHaveLength(result.kinds.length);
      expect(new Set(objects.map((object) => object.split('/')[0]!.split('.')[0]))).toEqual(
        new Set(result.kinds.map((kind) => kind.toLowerCase())),
      );
    });
  }

  it('covers the kinds the options add: ServiceMonitor, RuntimeClass, StatefulSet and the NetworkPolicies', async () => {
    const production = await dryRun(['--values', join(CI, 'production-values.yaml')]);
    const gitops = await dryRun(['--values', join(CI, 'gitops-values.yaml')]);
    const kinds = new Set([...production.kinds, ...gitops.kinds]);
    for (const kind of ['ServiceMonitor', 'RuntimeClass', 'StatefulSet', 'NetworkPolicy', 'PodDisruptionBudget', 'Deployment', 'CustomResourceDefinition']) {
      expect(kinds.has(kind), kind).toBe(true);
    }
    expect(applied(production.stdout).filter((object) => object.startsWith('networkpolicy'))).toHaveLength(3);
    expect(applied(gitops.stdout).filter((object) => object.startsWith('networkpolicy'))).toHaveLength(4);
  });
});

describe('the API server refuses what the values schema lets through', () => {
  // These values pass values.schema.json, which leaves Kubernetes objects to the API server:
  // the dry run is what catches them before an install would.
  it('an extra volume with an invalid name', async () => {
    const result = await dryRun([...WITH_URL, '--set-json', 'apiserver.extraVolumes=[{"name":"Not_A_Name","emptyDir":{}}]']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('spec.template.spec.volumes[1].name: Invalid value: "Not_A_Name"');
  });

  it('a relabeling with an action Prometheus does not know', async () => {
    const result = await dryRun([...WITH_URL, '--set', 'serviceMonitor.enabled=true', '--set-json', 'serviceMonitor.relabelings=[{"action":"rewrite"}]']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('spec.endpoints[0].relabelings[0].action: Unsupported value: "rewrite"');
  });

  it('a NetworkPolicy peer with an unknown field', async () => {
    const result = await dryRun([...WITH_URL, '--set-json', 'networkPolicy.metricsFrom=[{"namespace":"monitoring"}]']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('.spec.ingress[1].from[0].namespace: field not declared in schema');
  });
});
