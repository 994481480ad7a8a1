/**
 * `helm template` of the chart through the real helm binary, parsed into typed objects, for the
 * chart tier's tests.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { clusterTools } from '../cluster/cluster.js';

export const CHART = join(import.meta.dirname, '..', '..', 'charts', 'berth');
export const RELEASE = 'rel';
export const NAMESPACE = 'berth-system';
export const FULLNAME = `${RELEASE}-berth`;
export const DATABASE_URL = 'postgresql://berth:s3cret@db.example.internal:5432/berth';
/** The smallest valid configuration: the chart refuses to render without a database. */
export const WITH_URL = ['--set', `postgresql.url=${DATABASE_URL}`];

export const SCHEMA_ERROR = "values don't meet the specifications of the schema";

// ---------------------------------------------------------------------------------------------
// The rendered objects, typed as far as the assertions read them

export interface Metadata {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    fieldRef?: { fieldPath: string };
  };
}

export interface Probe {
  httpGet?: { path: string; port: string | number };
  exec?: { command: string[] };
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
}

export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  ports?: { name: string; containerPort: number }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}

export interface PodTemplate {
  metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    serviceAccountName?: string;
    securityContext?: Record<string, unknown>;
    containers: Container[];
    volumes?: ({ name: string } & Record<string, unknown>)[];
  };
}

export interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

export interface NetworkPolicyPeer {
  ipBlock?: { cidr: string; except?: string[] };
  namespaceSelector?: { matchLabels: Record<string, string> };
  podSelector?: { matchLabels: Record<string, string> };
}

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: Metadata;
  // Each kind's body; the accessors below give the parts the tests read a type.
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  rules?: Rule[];
  roleRef?: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace: string }[];
  handler?: string;
}

export class Rendered {
  constructor(readonly objects: Manifest[]) {}

  find(kind: string, name: string): Manifest | undefined {
    return this.objects.find((object) => object.kind === kind && object.metadata.name === name);
  }

  get(kind: string, name: string): Manifest {
    const object = this.find(kind, name);
    if (!object) throw new Error(`no ${kind} ${name} among ${this.ids().join(', ')}`);
    return object;
  }

  ofKind(kind: string): Manifest[] {
    return this.objects.filter((object) => object.kind === kind);
  }

  ids(): string[] {
    return this.objects.map((object) => `${object.kind}/${object.metadata.name}`).sort();
  }

  podTemplate(kind: string, name: string): PodTemplate {
    return this.get(kind, name).spec!.template as PodTemplate;
  }

  container(component: 'apiserver' | 'operator'): Container {
    return this.podTemplate('Deployment', `${FULLNAME}-${component}`).spec.containers[0]!;
  }

  env(component: 'apiserver' | 'operator'): Map<string, EnvVar> {
    return new Map((this.container(component).env ?? []).map((variable) => [variable.name, variable]));
  }

  /** The rules of every Role bound to a service account, by the namespace they apply in. */
  rulesOf(serviceAccount: string, namespace: string): Rule[] {
    return this.ofKind('RoleBinding')
      .filter((binding) => binding.metadata.namespace === namespace)
      .filter((binding) => binding.subjects?.some((s) => s.kind === 'ServiceAccount' && s.name === serviceAccount))
      .flatMap((binding) => {
        const role = this.ofKind('Role').find(
          (r) => r.metadata.name === binding.roleRef!.name && r.metadata.namespace === namespace,
        );
        return role?.rules ?? [];
      });
  }
}

// ---------------------------------------------------------------------------------------------
// helm

export const tools = clusterTools();

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

export async function run(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Result> {
  const { helm } = await tools;
  return new Promise((resolve, reject) => {
    execFile(helm, args, { env, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error && typeof error.code !== 'number') return reject(error);
      resolve({ code: error ? (error.code as number) : 0, stdout, stderr });
    });
  });
}

export async function templateText(args: string[]): Promise<string> {
  const result = await run(['template', RELEASE, CHART, '--namespace', NAMESPACE, ...args]);
  if (result.code !== 0) throw new Error(`helm template ${args.join(' ')} failed:\n${result.stderr}`);
  return result.stdout;
}

export async function render(args: string[] = WITH_URL): Promise<Rendered> {
  const documents = parseAllDocuments(await templateText(args));
  const objects: Manifest[] = [];
  for (const document of documents) {
    expect(document.errors, 'every rendered document is valid YAML').toEqual([]);
    const object = document.toJS() as Manifest | null;
    if (object) objects.push(object);
  }
  return new Rendered(objects);
}

/** A render that must fail; returns helm's error output. */
export async function renderError(args: string[]): Promise<string> {
  const result = await run(['template', RELEASE, CHART, '--namespace', NAMESPACE, ...args]);
  expect(result.code, `helm template ${args.join(' ')} should fail`).not.toBe(0);
  return result.stderr;
}

export function allows(rules: Rule[], verb: string, group: string, resource: string, name?: string): boolean {
  return rules.some(
    (rule) =>
      rule.apiGroups.includes(group) &&
      rule.resources.includes(resource) &&
      rule.verbs.includes(verb) &&
      (rule.resourceNames === undefined || (name !== undefined && rule.resourceNames.includes(name))),
  );
}
