/**
 * The chart's production options through the real helm binary: each value rendered and found
 * in the object it belongs to, and each unsafe combination refused with its message.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CHART, FULLNAME, NAMESPACE, RELEASE, render, renderError, run, SCHEMA_ERROR, WITH_URL, type Rendered } from './helm.js';

const COMPONENTS = ['apiserver', 'operator'] as const;
type Component = (typeof COMPONENTS)[number];
const DIGEST = `sha256:${'0123456789abcdef'.repeat(4)}`;
/** More than one operator replica needs snapshot storage they all reach. */
const SHARED_SNAPSHOTS = ['--set', 'snapshots.storage=s3', '--set', 'snapshots.s3.bucket=berth-snapshots'];

const deployment = (rendered: Rendered, component: Component) => rendered.get('Deployment', `${FULLNAME}-${component}`);

interface PolicyRule {
  from?: Record<string, unknown>[];
  to?: Record<string, unknown>[];
  ports?: { protocol: string; port: number }[];
}
interface PolicySpec {
  podSelector: { matchLabels?: Record<string, string>; matchExpressions?: unknown[] };
  policyTypes: string[];
  ingress: PolicyRule[];
  egress: PolicyRule[];
}
const policy = (rendered: Rendered, name: string) => rendered.get('NetworkPolicy', `${FULLNAME}-${name}`).spec as unknown as PolicySpec;
const ports = (rule: PolicyRule) => (rule.ports ?? []).map((port) => port.port);

describe('operator replicas and snapshot storage', () => {
  it('runs one operator replica by default, with its snapshots in an emptyDir', async () => {
    const rendered = await render();
    expect(deployment(rendered, 'operator').spec!.replicas).toBe(1);
    const volume = rendered.podTemplate('Deployment', `${FULLNAME}-operator`).spec.volumes!.find((v) => v.name === 'snapshots');
    expect(volume).toEqual({ name: 'snapshots', emptyDir: {} });
  });

  it('refuses more than one replica while snapshots are in an emptyDir of each pod', async () => {
    const error = await renderError([...WITH_URL, '--set', 'operator.replicas=2']);
    expect(error).toContain('operator.replicas is 2 but snapshots are kept in an emptyDir of each operator pod');
    expect(error).toContain('snapshots.directory.existingClaim naming a ReadWriteMany PersistentVolumeClaim');
  });

  it('renders several replicas with a shared claim or S3', async () => {
    for (const storage of [['--set', 'snapshots.directory.existingClaim=berth-snapshots'], SHARED_SNAPSHOTS]) {
      const rendered = await render([...WITH_URL, '--set', 'operator.replicas=3', ...storage]);
      expect(deployment(rendered, 'operator').spec!.replicas).toBe(3);
      expect(rendered.get('PodDisruptionBudget', `${FULLNAME}-operator`).spec).toMatchObject({ maxUnavailable: 1 });
    }
  });
});

describe('image', () => {
  it('puts the registry before the repository, and the digest wins over the tag', async () => {
    const tagged = await render([...WITH_URL, '--set', 'image.registry=registry.example.com:5000', '--set', 'image.repository=mirror/berth', '--set', 'image.tag=1.2.3']);
    const pinned = await render([
      ...WITH_URL,
      ...['--set', 'image.registry=registry.example.com:5000', '--set', 'image.repository=mirror/berth'],
      ...['--set', 'image.tag=1.2.3', '--set', `image.digest=${DIGEST}`],
    ]);
    const unregistered = await render([...WITH_URL, '--set', `image.digest=${DIGEST}`]);
    for (const component of COMPONENTS) {
      expect(tagged.container(component).image).toBe('registry.example.com:5000/mirror/berth:1.2.3');
      expect(pinned.container(component).image).toBe(`registry.example.com:5000/mirror/berth@${DIGEST}`);
      expect(unregistered.container(component).image).toBe(`berth/berth@${DIGEST}`);
    }
  });

  it('refuses a digest that is not sha256 and a registry with a path or scheme', async () => {
    for (const bad of ['image.digest=sha256:abc', 'image.digest=latest', 'image.registry=https://registry.example.com', 'image.registry=registry.example.com/team']) {
      expect(await renderError([...WITH_URL, '--set', bad]), bad).toContain(SCHEMA_ERROR);
    }
  });
});

describe('probes', () => {
  it('merges a changed field into the default probe and leaves the others as they are', async () => {
    const rendered = await render([
      ...WITH_URL,
      ...['--set', 'apiserver.livenessProbe.periodSeconds=20', '--set', 'apiserver.livenessProbe.timeoutSeconds=3'],
      ...['--set', 'operator.startupProbe.failureThreshold=120', '--set', 'operator.readinessProbe.periodSeconds=15'],
    ]);
    const apiserver = rendered.container('apiserver');
    expect(apiserver.livenessProbe).toEqual({ httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 20, timeoutSeconds: 3, failureThreshold: 3 });
    expect(apiserver.readinessProbe).toEqual({ httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 5, failureThreshold: 2 });
    const operator = rendered.container('operator');
    expect(operator.startupProbe).toEqual({ httpGet: { path: '/healthz', port: 'metrics' }, periodSeconds: 5, failureThreshold: 120 });
    expect(operator.readinessProbe).toEqual({ httpGet: { path: '/readyz', port: 'metrics' }, periodSeconds: 15, failureThreshold: 2 });
  });

  it('drops a probe that is disabled, each on its own', async () => {
    const rendered = await render([...WITH_URL, '--set', 'apiserver.startupProbe.enabled=false', '--set', 'operator.livenessProbe.enabled=false']);
    expect(rendered.container('apiserver').startupProbe).toBeUndefined();
    expect(rendered.container('apiserver').livenessProbe).toBeDefined();
    expect(rendered.container('operator').livenessProbe).toBeUndefined();
    expect(rendered.container('operator').readinessProbe).toBeDefined();
  });

  it('refuses an unknown probe field and a zero period', async () => {
    expect(await renderError([...WITH_URL, '--set', 'apiserver.livenessProbe.period=20'])).toContain(SCHEMA_ERROR);
    expect(await renderError([...WITH_URL, '--set', 'operator.readinessProbe.periodSeconds=0'])).toContain(SCHEMA_ERROR);
  });
});

describe('update strategy', () => {
  it('surges the API server by default and takes what is set', async () => {
    expect(deployment(await render(), 'apiserver').spec!.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    const set = await render([...WITH_URL, '--set', 'apiserver.updateStrategy.rollingUpdate.maxSurge=25%', '--set', 'apiserver.updateStrategy.rollingUpdate.maxUnavailable=1']);
    expect(deployment(set, 'apiserver').spec!.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: '25%', maxUnavailable: 1 } });
  });

  it("leaves the operator's to Kubernetes with leader election, Recreate without, and takes what is set", async () => {
    expect(deployment(await render(), 'operator').spec!.strategy).toBeUndefined();
    const recreate = await render([...WITH_URL, '--set', 'operator.updateStrategy.type=Recreate']);
    expect(deployment(recreate, 'operator').spec!.strategy).toEqual({ type: 'Recreate' });
    const single = await render([...WITH_URL, '--set', 'operator.leaderElection=false']);
    expect(deployment(single, 'operator').spec!.strategy).toEqual({ type: 'Recreate' });
  });

  it('refuses a rolling update of the operator without leader election, and an unknown type', async () => {
    const error = await renderError([...WITH_URL, '--set', 'operator.leaderElection=false', '--set', 'operator.updateStrategy.type=RollingUpdate']);
    expect(error).toContain('operator.leaderElection=false needs operator.updateStrategy.type=Recreate');
    expect(await renderError([...WITH_URL, '--set', 'apiserver.updateStrategy.type=BlueGreen'])).toContain(SCHEMA_ERROR);
  });
});

describe('service accounts', () => {
  it('creates one per component by default, and binds the Roles to it', async () => {
    const rendered = await render();
    for (const component of COMPONENTS) {
      const name = `${FULLNAME}-${component}`;
      expect(rendered.get('ServiceAccount', name).metadata.namespace).toBe(NAMESPACE);
      expect(rendered.podTemplate('Deployment', name).spec.serviceAccountName).toBe(name);
      expect(rendered.get('RoleBinding', name).subjects).toEqual([{ kind: 'ServiceAccount', name, namespace: NAMESPACE }]);
    }
  });

  it('creates it under the given name', async () => {
    const rendered = await render([...WITH_URL, '--set', 'operator.serviceAccount.name=berth-ops', '--set', 'operator.serviceAccount.annotations.team=platform']);
    expect(rendered.get('ServiceAccount', 'berth-ops').metadata.annotations).toEqual({ team: 'platform' });
    expect(rendered.find('ServiceAccount', `${FULLNAME}-operator`)).toBeUndefined();
    expect(rendered.podTemplate('Deployment', `${FULLNAME}-operator`).spec.serviceAccountName).toBe('berth-ops');
    expect(rendered.rulesOf('berth-ops', NAMESPACE).length).toBeGreaterThan(0);
  });

  it('uses an existing one without creating it, in both namespaces of the Roles', async () => {
    const rendered = await render([...WITH_URL, '--set', 'sandbox.namespace=sandboxes', '--set', 'apiserver.serviceAccount.create=false', '--set', 'apiserver.serviceAccount.name=berth-api']);
    expect(rendered.ofKind('ServiceAccount').map((account) => account.metadata.name)).toEqual([`${FULLNAME}-operator`]);
    expect(rendered.podTemplate('Deployment', `${FULLNAME}-apiserver`).spec.serviceAccountName).toBe('berth-api');
    for (const namespace of [NAMESPACE, 'sandboxes']) {
      const bindings = rendered.ofKind('RoleBinding').filter((binding) => binding.metadata.namespace === namespace);
      expect(bindings.filter((binding) => binding.subjects!.some((subject) => subject.name === 'berth-api'))).toHaveLength(1);
    }
  });

  it('refuses create=false without a name, and annotations it would not apply', async () => {
    expect(await renderError([...WITH_URL, '--set', 'operator.serviceAccount.create=false'])).toContain(
      'operator.serviceAccount.create is false: set operator.serviceAccount.name',
    );
    const error = await renderError([...WITH_URL, ...['--set', 'apiserver.serviceAccount.create=false', '--set', 'apiserver.serviceAccount.name=berth-api'], '--set', 'apiserver.serviceAccount.annotations.a=b']);
    expect(error).toContain('apiserver.serviceAccount.annotations are set but apiserver.serviceAccount.create is false');
  });
});

describe('extra args, env and volumes', () => {
  it('appends args after the command and adds env, volumes and mounts to each component', async () => {
    const volume = { name: 'ca', configMap: { name: 'corporate-ca' } };
    const mount = { name: 'ca', mountPath: '/etc/berth/ca', readOnly: true };
    const rendered = await render([
      ...WITH_URL,
      ...['--set-json', 'apiserver.extraArgs=["--public-url=https://berth.example.com"]', '--set-json', 'operator.extraArgs=["--log-level=debug"]'],
      ...['--set-json', 'operator.extraEnv=[{"name":"NODE_EXTRA_CA_CERTS","value":"/etc/berth/ca/ca.crt"}]'],
      ...['--set-json', `apiserver.extraVolumes=[${JSON.stringify(volume)}]`, '--set-json', `apiserver.extraVolumeMounts=[${JSON.stringify(mount)}]`],
      ...['--set-json', `operator.extraVolumes=[${JSON.stringify(volume)}]`, '--set-json', `operator.extraVolumeMounts=[${JSON.stringify(mount)}]`],
    ]);
    expect(rendered.container('apiserver').args).toEqual(['apiserver', '--public-url=https://berth.example.com']);
    expect(rendered.container('operator').args).toEqual(['operator', '--log-level=debug']);
    expect(rendered.env('operator').get('NODE_EXTRA_CA_CERTS')!.value).toBe('/etc/berth/ca/ca.crt');
    expect(rendered.env('apiserver').has('NODE_EXTRA_CA_CERTS')).toBe(false);
    for (const component of COMPONENTS) {
      const pod = rendered.podTemplate('Deployment', `${FULLNAME}-${component}`);
      expect(pod.spec.volumes).toContainEqual(volume);
      expect(pod.spec.containers[0]!.volumeMounts).toContainEqual(mount);
      // The chart's own mounts stay.
      expect(pod.spec.containers[0]!.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
    }
  });

  it('refuses an empty argument and args that are not a list', async () => {
    expect(await renderError([...WITH_URL, '--set-json', 'apiserver.extraArgs=[""]'])).toContain(SCHEMA_ERROR);
    expect(await renderError([...WITH_URL, '--set', 'operator.extraArgs=--log-level=debug'])).toContain(SCHEMA_ERROR);
  });
});

describe('NetworkPolicies of the API server, the operator and the database', () => {
  it('lets the API server accept its API and metrics ports, and reach DNS, the Kubernetes API, the database and public addresses', async () => {
    const rendered = await render();
    const api = policy(rendered, 'apiserver');
    expect(api.podSelector.matchLabels).toEqual((deployment(rendered, 'apiserver').spec!.selector as { matchLabels: unknown }).matchLabels);
    expect(api.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(api.ingress).toEqual([{ ports: [{ protocol: 'TCP', port: 8080 }] }, { ports: [{ protocol: 'TCP', port: 9090 }] }]);
    expect(api.egress.map(ports)).toEqual([[53, 53], [443, 6443], [5432], []]);
    // Without addresses of the Kubernetes API or the external database, their ports go anywhere.
    expect(api.egress[1]!.to).toBeUndefined();
    expect(api.egress[2]!.to).toBeUndefined();
    expect(api.egress[3]!.to).toEqual([{ ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10'] } }]);

    const operator = policy(rendered, 'operator');
    expect(operator.podSelector.matchLabels).toMatchObject({ 'app.kubernetes.io/component': 'operator' });
    expect(operator.ingress).toEqual([{ ports: [{ protocol: 'TCP', port: 9090 }] }]);
    expect(operator.egress.map(ports)).toEqual([[53, 53], [443, 6443], [5432], []]);
    expect(rendered.find('NetworkPolicy', `${FULLNAME}-postgresql`)).toBeUndefined();
  });

  it('narrows sources and destinations to the values, and adds extra rules as they are', async () => {
    const monitoring = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } };
    const ingressController = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } };
    const minio = { to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'minio' } } }], ports: [{ protocol: 'TCP', port: 9000 }] };
    const debug = { from: [{ podSelector: { matchLabels: { role: 'debug' } } }], ports: [{ protocol: 'TCP', port: 9229 }] };
    const rendered = await render([
      ...WITH_URL,
      ...['--set-json', `networkPolicy.apiserver.from=[${JSON.stringify(ingressController)}]`, '--set-json', `networkPolicy.metricsFrom=[${JSON.stringify(monitoring)}]`],
      ...['--set-json', `networkPolicy.operator.extraEgress=[${JSON.stringify(minio)}]`, '--set-json', `networkPolicy.apiserver.extraIngress=[${JSON.stringify(debug)}]`],
      ...['--set-json', 'networkPolicy.kubeApiServer={"cidrs":["10.0.0.1/32"],"ports":[6443]}'],
      ...['--set-json', 'networkPolicy.externalDatabase={"cidrs":["10.50.0.0/24"],"port":6432}'],
      ...['--set', 'networkPolicy.componentsAllowInternet=false'],
    ]);
    const api = policy(rendered, 'apiserver');
    expect(api.ingress).toEqual([
      { ports: [{ protocol: 'TCP', port: 8080 }], from: [ingressController] },
      { ports: [{ protocol: 'TCP', port: 9090 }], from: [monitoring] },
      debug,
    ]);
    const operator = policy(rendered, 'operator');
    expect(operator.ingress).toEqual([{ ports: [{ protocol: 'TCP', port: 9090 }], from: [monitoring] }]);
    for (const spec of [api, operator]) {
      expect(spec.egress[1]).toEqual({ ports: [{ protocol: 'TCP', port: 6443 }], to: [{ ipBlock: { cidr: '10.0.0.1/32' } }] });
      expect(spec.egress[2]).toEqual({ ports: [{ protocol: 'TCP', port: 6432 }], to: [{ ipBlock: { cidr: '10.50.0.0/24' } }] });
      expect(spec.egress.some((rule) => rule.to?.some((peer) => JSON.stringify(peer).includes('0.0.0.0/0')))).toBe(false);
    }
    expect(operator.egress.at(-1)).toEqual(minio);
    expect(api.egress).toHaveLength(3);
  });

  it('opens the operator port to any source when it serves the remote provider protocol', async () => {
    const monitoring = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } };
    const rendered = await render([...WITH_URL, '--set', 'remoteProvider.tokensSecret=tokens', '--set-json', `networkPolicy.metricsFrom=[${JSON.stringify(monitoring)}]`]);
    expect(policy(rendered, 'operator').ingress).toEqual([{ ports: [{ protocol: 'TCP', port: 9090 }] }]);
  });

  it('lets only the API server and operator of the release reach the bundled database, which reaches nothing', async () => {
    const rendered = await render(['--set', 'postgresql.bundled.enabled=true']);
    const database = policy(rendered, 'postgresql');
    const podLabels = rendered.podTemplate('StatefulSet', `${FULLNAME}-postgresql`).metadata.labels;
    expect(podLabels).toMatchObject(database.podSelector.matchLabels!);
    expect(database.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(database.egress).toEqual([]);
    expect(database.ingress).toEqual([
      {
        from: [
          {
            podSelector: {
              matchExpressions: [
                { key: 'app.kubernetes.io/name', operator: 'In', values: ['berth'] },
                { key: 'app.kubernetes.io/instance', operator: 'In', values: [RELEASE] },
                { key: 'app.kubernetes.io/component', operator: 'In', values: ['apiserver', 'operator'] },
              ],
            },
          },
        ],
        ports: [{ protocol: 'TCP', port: 5432 }],
      },
    ]);
    // The processes reach it by its pod labels, not by an address.
    for (const name of ['apiserver', 'operator']) {
      expect(policy(rendered, name).egress[2]).toEqual({
        to: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'berth', 'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/component': 'postgresql' } } }],
        ports: [{ protocol: 'TCP', port: 5432 }],
      });
    }
  });

  it('are left out one by one when disabled', async () => {
    const rendered = await render([
      '--set', 'postgresql.bundled.enabled=true',
      ...['--set', 'networkPolicy.apiserver.enabled=false', '--set', 'networkPolicy.operator.enabled=false', '--set', 'networkPolicy.database.enabled=false'],
    ]);
    expect(rendered.ofKind('NetworkPolicy').map((object) => object.metadata.name)).toEqual([`${FULLNAME}-sandboxes`]);
  });

  it('refuses an unknown key, a port out of range and an address that is not CIDR notation', async () => {
    for (const bad of ['networkPolicy.operator.from=x', 'networkPolicy.kubeApiServer.ports={70000}', 'networkPolicy.externalDatabase.cidrs={10.0.0.1}']) {
      expect(await renderError([...WITH_URL, '--set', bad]), bad).toContain(SCHEMA_ERROR);
    }
  });
});

describe('secrets under GitOps', () => {
  const GITOPS_ERROR = 'gitops=true: the chart is rendered without access to the cluster';

  it('renders a new secrets key and database password on every `helm template`, which is why gitops refuses them', async () => {
    const key = async () => (await render()).get('Secret', `${FULLNAME}-secrets-key`).data!.BERTH_SECRETS_KEY;
    expect(await key()).not.toBe(await key());
    const password = async () => (await render(['--set', 'postgresql.bundled.enabled=true'])).get('Secret', `${FULLNAME}-postgresql`).data!.password;
    expect(await password()).not.toBe(await password());
  });

  it('refuses a generated secrets key', async () => {
    const error = await renderError([...WITH_URL, '--set', 'gitops=true']);
    expect(error).toContain(GITOPS_ERROR);
    expect(error).toContain('set secrets.existingSecret');
    expect(error).not.toContain('postgresql.bundled.existingSecret');
  });

  it("refuses the bundled database's generated password, naming both when both are missing", async () => {
    const both = await renderError(['--set', 'gitops=true', '--set', 'postgresql.bundled.enabled=true']);
    expect(both).toContain('set secrets.existingSecret');
    expect(both).toContain('set postgresql.bundled.existingSecret');
    const one = await renderError(['--set', 'gitops=true', '--set', 'postgresql.bundled.enabled=true', '--set', 'secrets.existingSecret=berth-key']);
    expect(one).toContain('set postgresql.bundled.existingSecret');
    expect(one).not.toContain('set secrets.existingSecret');
  });

  it("refuses the node agent's generated token, and renders once the token's Secret is named", async () => {
    const base = [...WITH_URL, '--set', 'gitops=true', '--set', 'secrets.existingSecret=berth-key', '--set', 'nodeAgent.enabled=true'];
    const error = await renderError(base);
    expect(error).toContain('set nodeAgent.existingTokenSecret');
    expect(error).not.toContain('set secrets.existingSecret');
    const rendered = await render([...base, '--set', 'nodeAgent.existingTokenSecret=berth-node-token']);
    expect(rendered.find('Secret', `${FULLNAME}-node-agent-token`)).toBeUndefined();
    expect(rendered.ofKind('DaemonSet')).toHaveLength(1);
  });

  it('renders the same objects every time once every secret is named', async () => {
    const args = ['--set', 'gitops=true', '--set', 'postgresql.bundled.enabled=true', '--set', 'postgresql.bundled.existingSecret=berth-pg', '--set', 'secrets.existingSecret=berth-key'];
    const texts = await Promise.all([1, 2].map(async () => (await run(['template', RELEASE, CHART, '--namespace', NAMESPACE, ...args])).stdout));
    expect(texts[0]).toBe(texts[1]);
    const rendered = await render(args);
    // No Secret at all: the chart generates nothing.
    expect(rendered.ofKind('Secret')).toEqual([]);
    const postgres = rendered.podTemplate('StatefulSet', `${FULLNAME}-postgresql`).spec.containers[0]!;
    expect(postgres.env!.find((v) => v.name === 'POSTGRES_PASSWORD')!.valueFrom!.secretKeyRef).toEqual({ name: 'berth-pg', key: 'password' });
    for (const component of COMPONENTS) {
      const env = rendered.env(component);
      const names = rendered.container(component).env!.map((variable) => variable.name);
      // Kubernetes expands $(VAR) only from variables defined before it.
      expect(names.indexOf('BERTH_DATABASE_PASSWORD')).toBeLessThan(names.indexOf('DATABASE_URL'));
      expect(env.get('BERTH_DATABASE_PASSWORD')!.valueFrom!.secretKeyRef).toEqual({ name: 'berth-pg', key: 'password' });
      expect(env.get('DATABASE_URL')!.value).toBe(`postgresql://berth:$(BERTH_DATABASE_PASSWORD)@${FULLNAME}-postgresql.${NAMESPACE}.svc:5432/berth`);
      expect(env.get('BERTH_SECRETS_KEY')!.valueFrom!.secretKeyRef).toEqual({ name: 'berth-key', key: 'BERTH_SECRETS_KEY' });
    }
  });

  it('accepts an external database with gitops, and refuses a bundled password Secret without the bundled database', async () => {
    const rendered = await render([...WITH_URL, '--set', 'gitops=true', '--set', 'secrets.existingSecret=berth-key']);
    expect(rendered.ofKind('Secret').map((secret) => secret.metadata.name)).toEqual([`${FULLNAME}-database`]);
    const error = await renderError([...WITH_URL, '--set', 'postgresql.bundled.existingSecret=berth-pg']);
    expect(error).toContain('postgresql.bundled.existingSecret holds the password of the bundled database, but postgresql.bundled.enabled is false');
  });
});

describe('the values reference', () => {
  // Values that are Kubernetes objects (or tables of them) are one row each, not one per field.
  const OBJECTS = new Set([
    'podSecurityContext', 'securityContext', 'sandbox.gpuTable', 'networkPolicy.dns.podLabels', 'postgresql.bundled.podSecurityContext',
    ...['apiserver', 'operator'].flatMap((component) =>
      ['resources', 'updateStrategy', 'startupProbe', 'livenessProbe', 'readinessProbe'].map((key) => `${component}.${key}`),
    ),
    'postgresql.bundled.resources',
  ]);

  function leaves(value: unknown, path: string[] = []): string[] {
    const key = path.join('.');
    const isMap = typeof value === 'object' && value !== null && !Array.isArray(value);
    if (path.length > 0 && (!isMap || OBJECTS.has(key) || Object.keys(value).length === 0)) return [key];
    return Object.entries(value as Record<string, unknown>).flatMap(([name, child]) => leaves(child, [...path, name]));
  }

  it('in docs/install-kubernetes.md has a row for every value of values.yaml', async () => {
    const values = parse(await readFile(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
    const doc = await readFile(join(CHART, '..', '..', 'docs', 'install-kubernetes.md'), 'utf8');
    const paths = leaves(values);
    expect(paths.length).toBeGreaterThan(100);
    expect(paths.filter((path) => !doc.includes(`| \`${path}\` |`))).toEqual([]);
  });
});
