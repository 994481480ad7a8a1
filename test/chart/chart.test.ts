/**
 * The Helm chart through the real helm binary: `helm lint`, and the objects `helm template`
 * renders, parsed and checked field by field. No cluster is involved; the cluster tier
 * installs the chart for real.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  allows,
  CHART,
  DATABASE_URL,
  FULLNAME,
  NAMESPACE,
  RELEASE,
  render,
  renderError,
  run,
  SCHEMA_ERROR,
  templateText,
  type PodTemplate,
  WITH_URL,
  type NetworkPolicyPeer,
  type Rendered,
} from './helm.js';

const VALUES = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as {
  sandbox: { gpuTable: Record<string, unknown> };
};
const DATABASE_ERROR = 'Berth needs a PostgreSQL database: set exactly one of postgresql.url';

// ---------------------------------------------------------------------------------------------

describe('helm lint', () => {
  const ciValues = ['url-values.yaml', 'bundled-values.yaml', 'production-values.yaml', 'gitops-values.yaml'].map((file) => ['--values', join(CHART, 'ci', file)]);
  for (const values of [[], ...ciValues]) {
    it(`passes with ${values.length ? values[1]!.split('/').pop() : 'the defaults'}, also with --strict`, async () => {
      for (const strict of [[], ['--strict']]) {
        const result = await run(['lint', CHART, ...strict, ...values]);
        expect(result.stdout + result.stderr, 'helm lint output').toContain('0 chart(s) failed');
        expect(result.code).toBe(0);
      }
    });
  }
});

describe('disruption budgets and rollout history', () => {
  it('gives each Deployment of several replicas a PodDisruptionBudget selecting exactly its pods', async () => {
    const rendered = await render([...WITH_URL, '--set', 'operator.replicas=2', '--set', 'snapshots.directory.existingClaim=berth-snapshots']);
    for (const component of ['apiserver', 'operator'] as const) {
      const budget = rendered.get('PodDisruptionBudget', `${FULLNAME}-${component}`);
      const deployment = rendered.get('Deployment', `${FULLNAME}-${component}`);
      expect(budget.apiVersion).toBe('policy/v1');
      expect(budget.spec).toEqual({ maxUnavailable: 1, selector: deployment.spec!.selector });
      expect(budget.metadata.labels).toMatchObject({ 'app.kubernetes.io/component': component });
    }
  });

  it('renders no budget for a single replica (it would block every drain) nor when disabled', async () => {
    const rendered = await render([...WITH_URL, '--set', 'apiserver.replicas=1', '--set', 'operator.podDisruptionBudget.enabled=false']);
    expect(rendered.ofKind('PodDisruptionBudget')).toEqual([]);
    const other = await render([...WITH_URL, '--set', 'apiserver.podDisruptionBudget.maxUnavailable=2', '--set', 'apiserver.replicas=3']);
    expect(other.get('PodDisruptionBudget', `${FULLNAME}-apiserver`).spec).toMatchObject({ maxUnavailable: 2 });
  });

  it('sets revisionHistoryLimit on both Deployments, 10 by default', async () => {
    const byDefault = await render();
    const changed = await render([...WITH_URL, '--set', 'revisionHistoryLimit=3']);
    for (const component of ['apiserver', 'operator']) {
      expect(byDefault.get('Deployment', `${FULLNAME}-${component}`).spec!.revisionHistoryLimit).toBe(10);
      expect(changed.get('Deployment', `${FULLNAME}-${component}`).spec!.revisionHistoryLimit).toBe(3);
    }
  });

  it('refuses a mistyped budget value', async () => {
    expect(await renderError([...WITH_URL, '--set', 'operator.podDisruptionBudget.maxUnavailble=1'])).toMatch(/maxUnavailble/);
    expect(await renderError([...WITH_URL, '--set', 'apiserver.podDisruptionBudget.maxUnavailable=0'])).toMatch(/maxUnavailable/);
  });
});

describe('the default render', () => {
  let rendered: Rendered;
  beforeAll(async () => {
    rendered = await render();
  });

  it('renders the expected objects, and nothing cluster-wide but the CRDs', () => {
    expect(rendered.ids()).toEqual(
      [
        'CustomResourceDefinition/agents.berth.dev',
        'CustomResourceDefinition/fleets.berth.dev',
        'CustomResourceDefinition/schedules.berth.dev',
        'CustomResourceDefinition/sessions.berth.dev',
        'CustomResourceDefinition/snapshots.berth.dev',
        'CustomResourceDefinition/warmpools.berth.dev',
        `Deployment/${FULLNAME}-apiserver`,
        `Deployment/${FULLNAME}-operator`,
        `NetworkPolicy/${FULLNAME}-apiserver`,
        `NetworkPolicy/${FULLNAME}-operator`,
        `NetworkPolicy/${FULLNAME}-sandboxes`,
        // One operator replica by default (its snapshots are in an emptyDir): no budget for it.
        `PodDisruptionBudget/${FULLNAME}-apiserver`,
        `Role/${FULLNAME}-apiserver`,
        `Role/${FULLNAME}-operator`,
        `RoleBinding/${FULLNAME}-apiserver`,
        `RoleBinding/${FULLNAME}-operator`,
        `Secret/${FULLNAME}-database`,
        `Secret/${FULLNAME}-secrets-key`,
        `Service/${FULLNAME}-apiserver`,
        `Service/${FULLNAME}-apiserver-metrics`,
        `Service/${FULLNAME}-operator-metrics`,
        `ServiceAccount/${FULLNAME}-apiserver`,
        `ServiceAccount/${FULLNAME}-operator`,
      ].sort(),
    );
    for (const object of rendered.objects) {
      if (object.kind === 'CustomResourceDefinition') continue;
      expect(object.metadata.namespace, `${object.kind}/${object.metadata.name}`).toBe(NAMESPACE);
    }
  });

  it('labels every object the Kubernetes way', () => {
    for (const object of rendered.objects) {
      expect(object.metadata.labels, `${object.kind}/${object.metadata.name}`).toMatchObject({
        'app.kubernetes.io/name': 'berth',
        'app.kubernetes.io/instance': RELEASE,
        'app.kubernetes.io/version': '0.1.0',
        'app.kubernetes.io/managed-by': 'Helm',
        'helm.sh/chart': 'berth-0.2.0',
      });
    }
  });

  it('runs `berth apiserver` and `berth operator` from the one image', () => {
    for (const component of ['apiserver', 'operator'] as const) {
      const container = rendered.container(component);
      expect(container.image).toBe('berth/berth:0.1.0');
      // The image's entrypoint is the berth CLI; the chart only picks the command.
      expect(container.command).toBeUndefined();
      expect(container.args).toEqual([component]);
    }
  });

  it('selects pods by labels that survive an upgrade, and the Services select the right pods', () => {
    for (const component of ['apiserver', 'operator']) {
      const deployment = rendered.get('Deployment', `${FULLNAME}-${component}`);
      const selector = (deployment.spec!.selector as { matchLabels: Record<string, string> }).matchLabels;
      expect(selector).toEqual({
        'app.kubernetes.io/name': 'berth',
        'app.kubernetes.io/instance': RELEASE,
        'app.kubernetes.io/component': component,
      });
      expect(rendered.podTemplate('Deployment', `${FULLNAME}-${component}`).metadata.labels).toMatchObject(selector);
    }
    const services = { apiserver: `${FULLNAME}-apiserver`, operator: `${FULLNAME}-operator-metrics` };
    for (const [component, service] of Object.entries(services)) {
      const serviceSelector = rendered.get('Service', service).spec!.selector as Record<string, string>;
      expect(serviceSelector).not.toHaveProperty('helm.sh/chart');
      expect(serviceSelector).not.toHaveProperty('app.kubernetes.io/version');
      expect(rendered.podTemplate('Deployment', `${FULLNAME}-${component}`).metadata.labels).toMatchObject(serviceSelector);
    }
  });

  it('wires the environment both processes read', () => {
    for (const component of ['apiserver', 'operator'] as const) {
      const env = rendered.env(component);
      expect(env.size, 'no variable is set twice').toBe(rendered.container(component).env!.length);
      expect(env.get('DATABASE_URL')!.valueFrom!.secretKeyRef).toEqual({ name: `${FULLNAME}-database`, key: 'DATABASE_URL' });
      expect(env.get('BERTH_NAMESPACE')!.valueFrom!.fieldRef).toEqual({ fieldPath: 'metadata.namespace' });
      expect(env.get('POD_NAME')!.valueFrom!.fieldRef).toEqual({ fieldPath: 'metadata.name' });
      const values = Object.fromEntries([...env].filter(([, v]) => v.value !== undefined).map(([k, v]) => [k, v.value]));
      expect(values).toMatchObject({
        BERTH_HOST: '0.0.0.0',
        BERTH_LOG_LEVEL: 'info',
        BERTH_SANDBOX_NAMESPACE: NAMESPACE,
        BERTH_RUNTIME_CLASS: 'gvisor',
        BERTH_IMAGE_PYTHON: 'berth/sandbox-python:0.1.0',
        BERTH_IMAGE_NODE: 'berth/sandbox-node:0.1.0',
        BERTH_IMAGE_GO: 'berth/sandbox-go:0.1.0',
        BERTH_SANDBOX_CPUS: '1',
        BERTH_SANDBOX_MEMORY: '1Gi',
        BERTH_SANDBOX_CPU_REQUEST: '0.25',
        BERTH_SANDBOX_MEMORY_REQUEST: '256Mi',
        BERTH_WORKSPACE_SIZE: '10Gi',
        BERTH_EXEC_TIMEOUT: '120s',
      });
      // Unset means "Berth's default" (no browser agents; the built-in default model).
      expect(env.has('BERTH_BROWSER_IMAGE')).toBe(false);
      expect(env.has('BERTH_DEFAULT_MODEL')).toBe(false);
      const gpuTable = JSON.parse(env.get('BERTH_GPU_TABLE')!.value!) as Record<string, unknown>;
      expect(gpuTable).toEqual(VALUES.sandbox.gpuTable);
      expect(Object.keys(gpuTable).sort()).toEqual(['a100', 'a10g', 'h100', 'l4', 't4']);
      expect(gpuTable.t4).toEqual({
        nodeSelector: { 'nvidia.com/gpu.product': 'Tesla-T4' },
        tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
        resource: 'nvidia.com/gpu',
        count: 1,
      });
    }
    expect(rendered.env('apiserver').get('BERTH_PORT')!.value).toBe('8080');
    const operator = rendered.env('operator');
    expect(operator.get('BERTH_METRICS_PORT')!.value).toBe('9090');
    expect(operator.get('BERTH_LEADER_ELECTION')!.value).toBe('true');
    expect(operator.get('BERTH_CONTROLLER_WORKERS')!.value).toBe('4');
  });

  it('stores the connection string in the Secret the processes read', () => {
    const secret = rendered.get('Secret', `${FULLNAME}-database`);
    expect(Buffer.from(secret.data!.DATABASE_URL!, 'base64').toString()).toBe(DATABASE_URL);
  });

  it('probes /healthz and /readyz on the ports the processes listen on, and serves /metrics on port 9090 in both', () => {
    const ports = { apiserver: ['http', 8080], operator: ['metrics', 9090] } as const;
    for (const [component, [portName, port]] of Object.entries(ports)) {
      const container = rendered.container(component as 'apiserver' | 'operator');
      expect(container.ports).toContainEqual(expect.objectContaining({ name: portName, containerPort: port }));
      expect(container.ports).toContainEqual(expect.objectContaining({ name: 'metrics', containerPort: 9090 }));
      expect(rendered.env(component as 'apiserver' | 'operator').get('BERTH_METRICS_PORT')!.value).toBe('9090');
      expect(container.livenessProbe!.httpGet).toEqual({ path: '/healthz', port: portName });
      expect(container.readinessProbe!.httpGet).toEqual({ path: '/readyz', port: portName });
      expect(container.startupProbe!.httpGet).toEqual({ path: '/healthz', port: portName });
    }
    // The API Service (possibly a LoadBalancer) carries the API only; metrics have a headless Service.
    const service = rendered.get('Service', `${FULLNAME}-apiserver`);
    expect(service.spec!.ports).toEqual([expect.objectContaining({ name: 'http', port: 8080, targetPort: 'http' })]);
    const metrics = rendered.get('Service', `${FULLNAME}-apiserver-metrics`);
    expect(metrics.spec).toMatchObject({ clusterIP: 'None', ports: [{ name: 'metrics', port: 9090, targetPort: 'metrics', protocol: 'TCP' }] });
    expect(metrics.spec!.selector).toEqual(service.spec!.selector);
  });

  it('runs both processes as non-root with a read-only root filesystem and no capabilities', () => {
    for (const component of ['apiserver', 'operator'] as const) {
      const pod = rendered.podTemplate('Deployment', `${FULLNAME}-${component}`);
      expect(pod.spec.serviceAccountName).toBe(`${FULLNAME}-${component}`);
      expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
      expect(pod.spec.securityContext!.runAsUser).not.toBe(0);
      expect(pod.spec.containers[0]!.securityContext).toEqual({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
    }
  });

  it('has no RuntimeClass, ServiceMonitor or bundled PostgreSQL unless asked', () => {
    expect(rendered.ofKind('RuntimeClass')).toEqual([]);
    expect(rendered.ofKind('ServiceMonitor')).toEqual([]);
    expect(rendered.ofKind('StatefulSet')).toEqual([]);
  });
});

describe('values reach the processes', () => {
  it('passes sandbox, image and operator settings through', async () => {
    const rendered = await render([
      ...WITH_URL,
      ...['--set', 'image.repository=registry.example/berth', '--set', 'image.tag=1.2.3'],
      ...['--set', 'logLevel=debug', '--set', 'defaultModel=anthropic/claude-sonnet-4'],
      ...['--set', 'sandbox.images.browser=registry.example/browser:1', '--set', 'sandbox.runtimeClassName='],
      ...['--set', 'sandbox.resources.cpuLimit=2.5', '--set', 'sandbox.resources.memoryLimit=4Gi'],
      ...['--set', 'sandbox.execTimeout=5m', '--set', 'sandbox.workspaceSize=20Gi'],
      ...['--set', 'operator.leaderElection=false', '--set', 'operator.replicas=1', '--set', 'operator.controllerWorkers=16'],
    ]);
    expect(rendered.container('apiserver').image).toBe('registry.example/berth:1.2.3');
    const env = rendered.env('operator');
    const value = (name: string) => env.get(name)?.value;
    expect(value('BERTH_LOG_LEVEL')).toBe('debug');
    expect(value('BERTH_DEFAULT_MODEL')).toBe('anthropic/claude-sonnet-4');
    expect(value('BERTH_BROWSER_IMAGE')).toBe('registry.example/browser:1');
    // Berth reads "none" as "no runtimeClassName on sandbox pods".
    expect(value('BERTH_RUNTIME_CLASS')).toBe('none');
    expect(value('BERTH_SANDBOX_CPUS')).toBe('2.5');
    expect(value('BERTH_SANDBOX_MEMORY')).toBe('4Gi');
    expect(value('BERTH_EXEC_TIMEOUT')).toBe('5m');
    expect(value('BERTH_WORKSPACE_SIZE')).toBe('20Gi');
    expect(value('BERTH_LEADER_ELECTION')).toBe('false');
    expect(value('BERTH_CONTROLLER_WORKERS')).toBe('16');
    // Without an election, old and new pod must not overlap during a rollout.
    expect(rendered.get('Deployment', `${FULLNAME}-operator`).spec!.strategy).toEqual({ type: 'Recreate' });
  });

  it('merges GPU types into the table, and drops one set to null', async () => {
    const rtx = { nodeSelector: { 'gpu.example/model': 'rtx-6000' }, resource: 'nvidia.com/gpu', count: 2 };
    const rendered = await render([
      ...WITH_URL,
      ...['--set', 'sandbox.gpuTable.t4=null', '--set-json', `sandbox.gpuTable.rtx=${JSON.stringify(rtx)}`],
    ]);
    const table = JSON.parse(rendered.env('operator').get('BERTH_GPU_TABLE')!.value!) as Record<string, unknown>;
    expect(Object.keys(table).sort()).toEqual(['a100', 'a10g', 'h100', 'l4', 'rtx']);
    expect(table.rtx).toEqual(rtx);
  });

  it('rolls the pods when the connection string changes', async () => {
    const annotation = async (url: string) =>
      (await render(['--set', `postgresql.url=${url}`])).podTemplate('Deployment', `${FULLNAME}-apiserver`).metadata.annotations?.[
        'checksum/database'
      ];
    const first = await annotation(DATABASE_URL);
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(await annotation(`${DATABASE_URL}?sslmode=require`)).not.toBe(first);
  });

  it('refuses more than one operator replica without leader election', async () => {
    const error = await renderError([...WITH_URL, '--set', 'operator.leaderElection=false', '--set', 'operator.replicas=2', '--set', 'snapshots.storage=s3', '--set', 'snapshots.s3.bucket=berth-snapshots']);
    expect(error).toContain('operator.leaderElection=false needs operator.replicas of 0 or 1');
  });
});

describe('sign-in to the management plane', () => {
  it('has no identity provider by default, and only the API server reads the sign-in settings', async () => {
    const rendered = await render();
    const apiserver = rendered.env('apiserver');
    expect(apiserver.get('BERTH_SIGNUP')!.value).toBe('invite');
    expect([...apiserver.keys()].filter((name) => name.startsWith('BERTH_OIDC_') || name === 'BERTH_DASHBOARD_URL')).toEqual([]);
    expect([...rendered.env('operator').keys()].filter((name) => name.startsWith('BERTH_OIDC_') || name === 'BERTH_SIGNUP')).toEqual([]);
  });

  it('passes the provider through, with the client secret from the named Secret only', async () => {
    const args = [
      ...WITH_URL,
      '--set', 'oidc.issuer=https://id.example.com/realms/acme',
      '--set', 'oidc.clientId=berth',
      '--set', 'oidc.existingSecret=berth-oidc',
      '--set', 'oidc.dashboardUrl=https://berth.example.com',
      '--set', 'oidc.signup=organization',
    ];
    const env = (await render(args)).env('apiserver');
    expect(env.get('BERTH_OIDC_ISSUER')!.value).toBe('https://id.example.com/realms/acme');
    expect(env.get('BERTH_OIDC_CLIENT_ID')!.value).toBe('berth');
    expect(env.get('BERTH_OIDC_CLIENT_SECRET')!.valueFrom!.secretKeyRef).toEqual({ name: 'berth-oidc', key: 'client-secret' });
    expect(env.get('BERTH_DASHBOARD_URL')!.value).toBe('https://berth.example.com');
    expect(env.get('BERTH_SIGNUP')!.value).toBe('organization');
    expect(env.get('BERTH_OIDC_CLIENT_SECRET')!.value).toBeUndefined();
  });

  it('refuses an issuer without the client id or the Secret, and an unknown signup', async () => {
    expect(await renderError([...WITH_URL, '--set', 'oidc.issuer=https://id.example.com', '--set', 'oidc.clientId=berth'])).toContain(SCHEMA_ERROR);
    expect(await renderError([...WITH_URL, '--set', 'oidc.issuer=https://id.example.com', '--set', 'oidc.existingSecret=s'])).toContain(SCHEMA_ERROR);
    expect(await renderError([...WITH_URL, '--set', 'oidc.signup=anyone'])).toContain(SCHEMA_ERROR);
  });
});

describe('plans', () => {
  it('gives the API server the default plan and the enterprise limit, and refuses an unknown plan', async () => {
    const apiserver = (await render()).env('apiserver');
    expect(apiserver.get('BERTH_DEFAULT_PLAN')!.value).toBe('free');
    expect(apiserver.get('BERTH_ENTERPRISE_RATE_LIMIT')!.value).toBe('60000');
    const set = (await render([...WITH_URL, '--set', 'plans.default=pro', '--set', 'plans.enterpriseRateLimit=9000'])).env('apiserver');
    expect(set.get('BERTH_DEFAULT_PLAN')!.value).toBe('pro');
    expect(set.get('BERTH_ENTERPRISE_RATE_LIMIT')!.value).toBe('9000');
    expect(await renderError([...WITH_URL, '--set', 'plans.default=gold'])).toContain(SCHEMA_ERROR);
  });
});

describe('CRDs', () => {
  const crdNames = ['agents.berth.dev', 'fleets.berth.dev', 'schedules.berth.dev', 'sessions.berth.dev', 'snapshots.berth.dev', 'warmpools.berth.dev'];

  it('are installed and kept on uninstall by default', async () => {
    const crds = (await render()).ofKind('CustomResourceDefinition');
    expect(crds.map((crd) => crd.metadata.name).sort()).toEqual(crdNames);
    for (const crd of crds) expect(crd.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
  });

  it('are deleted with the release when crds.keep is false', async () => {
    const crds = (await render([...WITH_URL, '--set', 'crds.keep=false'])).ofKind('CustomResourceDefinition');
    expect(crds).toHaveLength(6);
    for (const crd of crds) expect(crd.metadata.annotations?.['helm.sh/resource-policy']).toBeUndefined();
  });

  it('are left out when crds.enabled is false', async () => {
    expect((await render([...WITH_URL, '--set', 'crds.enabled=false'])).ofKind('CustomResourceDefinition')).toEqual([]);
  });
});

describe('RBAC', () => {
  const apiserver = `${FULLNAME}-apiserver`;
  const operator = `${FULLNAME}-operator`;
  const berthResources = ['sessions', 'agents', 'snapshots', 'schedules', 'fleets', 'warmpools'];

  it('is namespaced and names every verb, resource and group', async () => {
    for (const args of [WITH_URL, [...WITH_URL, '--set', 'sandbox.namespace=sandboxes']]) {
      const rendered = await render(args);
      expect(rendered.ofKind('ClusterRole')).toEqual([]);
      expect(rendered.ofKind('ClusterRoleBinding')).toEqual([]);
      for (const role of rendered.ofKind('Role')) {
        for (const rule of role.rules!) {
          for (const list of [rule.verbs, rule.resources, rule.apiGroups]) expect(list).not.toContain('*');
        }
      }
    }
  });

  it('covers exactly the custom resources the chart installs', async () => {
    // The rules list the resources by hand; a new CRD must come with its permissions.
    const rendered = await render();
    const plurals = rendered
      .ofKind('CustomResourceDefinition')
      .map((crd) => (crd.spec!.names as { plural: string }).plural)
      .sort();
    expect(plurals).toEqual([...berthResources].sort());
    for (const account of [apiserver, operator]) {
      const resources = rendered
        .rulesOf(account, NAMESPACE)
        .filter((rule) => rule.apiGroups.includes('berth.dev'))
        .flatMap((rule) => rule.resources.filter((resource) => !resource.includes('/')));
      expect([...new Set(resources)].sort()).toEqual(plurals);
    }
  });

  it('explains every rule in a comment', async () => {
    const text = await templateText([...WITH_URL, '--set', 'sandbox.namespace=sandboxes', '--show-only', 'templates/rbac.yaml']);
    const lines = text.split('\n');
    const rules = lines.flatMap((line, index) => (/^\s*- apiGroups:/.test(line) ? [index] : []));
    expect(rules.length).toBeGreaterThan(5);
    for (const index of rules) expect(lines[index - 1], `the line before rule ${lines[index]}`).toMatch(/^\s*#/);
  });

  it('lets the API server write resources and exec into sandboxes, but never create pods or leases', async () => {
    const rules = (await render()).rulesOf(apiserver, NAMESPACE);
    for (const resource of berthResources) {
      for (const verb of ['get', 'list', 'watch', 'create', 'update', 'delete']) expect(allows(rules, verb, 'berth.dev', resource)).toBe(true);
      expect(allows(rules, 'patch', 'berth.dev', resource)).toBe(false);
      expect(allows(rules, 'update', 'berth.dev', `${resource}/status`)).toBe(true);
    }
    expect(allows(rules, 'get', '', 'pods')).toBe(true);
    expect(allows(rules, 'create', '', 'pods/exec')).toBe(true);
    expect(allows(rules, 'get', '', 'pods/exec')).toBe(true);
    for (const verb of ['create', 'delete', 'list', 'update', 'patch']) expect(allows(rules, verb, '', 'pods')).toBe(false);
    for (const verb of ['get', 'create', 'update']) expect(allows(rules, verb, 'coordination.k8s.io', 'leases', 'berth-operator')).toBe(false);
    expect(allows(rules, 'get', '', 'secrets')).toBe(false);
  });

  it('lets the operator run sandbox pods, exec into them and hold its Lease', async () => {
    const rules = (await render()).rulesOf(operator, NAMESPACE);
    for (const resource of berthResources) {
      for (const verb of ['get', 'list', 'watch', 'update', 'patch', 'delete']) expect(allows(rules, verb, 'berth.dev', resource)).toBe(true);
      expect(allows(rules, 'create', 'berth.dev', resource)).toBe(false);
      expect(allows(rules, 'update', 'berth.dev', `${resource}/status`)).toBe(true);
      expect(allows(rules, 'update', 'berth.dev', `${resource}/finalizers`)).toBe(true);
    }
    for (const verb of ['get', 'list', 'watch', 'create', 'delete', 'patch']) expect(allows(rules, verb, '', 'pods')).toBe(true);
    expect(allows(rules, 'update', '', 'pods')).toBe(false);
    expect(allows(rules, 'create', '', 'pods/exec')).toBe(true);
    expect(allows(rules, 'get', '', 'pods/exec')).toBe(true);
    expect(allows(rules, 'create', 'coordination.k8s.io', 'leases')).toBe(true);
    expect(allows(rules, 'get', 'coordination.k8s.io', 'leases', 'berth-operator')).toBe(true);
    expect(allows(rules, 'update', 'coordination.k8s.io', 'leases', 'berth-operator')).toBe(true);
    // Only its own Lease: other controllers' leases in the namespace are out of reach.
    expect(allows(rules, 'update', 'coordination.k8s.io', 'leases', 'someone-else')).toBe(false);
    expect(allows(rules, 'create', '', 'events')).toBe(true);
    expect(allows(rules, 'get', '', 'secrets')).toBe(false);
    // The guest programs' ConfigMap (ADR 47): created once, immutable, never read back or changed.
    expect(allows(rules, 'create', '', 'configmaps')).toBe(true);
    expect(allows(rules, 'update', '', 'configmaps')).toBe(false);
    expect(allows((await render()).rulesOf(apiserver, NAMESPACE), 'create', '', 'configmaps')).toBe(false);
  });

  it('grants pod access in the sandbox namespace only, when it is a separate one', async () => {
    const rendered = await render([...WITH_URL, '--set', 'sandbox.namespace=sandboxes']);
    for (const account of [apiserver, operator]) {
      const home = rendered.rulesOf(account, NAMESPACE);
      const sandboxes = rendered.rulesOf(account, 'sandboxes');
      expect(allows(home, 'get', '', 'pods')).toBe(false);
      expect(allows(home, 'create', '', 'pods/exec')).toBe(false);
      expect(allows(sandboxes, 'get', '', 'pods')).toBe(true);
      expect(allows(sandboxes, 'create', '', 'pods/exec')).toBe(true);
      expect(allows(sandboxes, 'get', 'berth.dev', 'agents')).toBe(false);
      expect(allows(home, 'get', 'berth.dev', 'agents')).toBe(true);
    }
    expect(allows(rendered.rulesOf(operator, 'sandboxes'), 'create', '', 'pods')).toBe(true);
    expect(allows(rendered.rulesOf(apiserver, 'sandboxes'), 'create', '', 'pods')).toBe(false);
    for (const binding of rendered.ofKind('RoleBinding')) {
      for (const subject of binding.subjects!) expect(subject.namespace).toBe(NAMESPACE);
    }
    expect(rendered.env('operator').get('BERTH_SANDBOX_NAMESPACE')!.value).toBe('sandboxes');
  });
});

describe('the sandbox NetworkPolicy', () => {
  const name = `${FULLNAME}-sandboxes`;
  const policyOf = (rendered: Rendered) =>
    rendered.get('NetworkPolicy', name).spec as {
      podSelector: { matchLabels: Record<string, string> };
      policyTypes: string[];
      ingress: unknown[];
      egress: { to: NetworkPolicyPeer[]; ports?: { protocol: string; port: number }[] }[];
    };
  const privateRanges = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10'];

  it('denies all ingress and allows DNS and public addresses only', async () => {
    const rendered = await render();
    const policy = policyOf(rendered);
    expect(rendered.get('NetworkPolicy', name).metadata.namespace).toBe(NAMESPACE);
    expect(policy.podSelector).toEqual({ matchLabels: { 'berth.dev/sandbox': 'true' } });
    expect(policy.policyTypes.sort()).toEqual(['Egress', 'Ingress']);
    expect(policy.ingress).toEqual([]);
    const dns = policy.egress.find((rule) => rule.ports?.some((port) => port.port === 53));
    expect(dns).toEqual({
      to: [
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
          podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
        },
      ],
      ports: [
        { protocol: 'UDP', port: 53 },
        { protocol: 'TCP', port: 53 },
      ],
    });
    const blocks = policy.egress.flatMap((rule) => rule.to.flatMap((peer) => (peer.ipBlock ? [peer.ipBlock] : [])));
    expect(blocks).toEqual([{ cidr: '0.0.0.0/0', except: privateRanges }]);
    expect(policy.egress).toHaveLength(2);
  });

  it('adds denied and allowed ranges, and drops the internet when asked', async () => {
    const ranges = ['--set', 'networkPolicy.extraDeniedCIDRs={203.0.113.0/24}', '--set', 'networkPolicy.allowedCIDRs={10.20.0.15/32}'];
    const policy = policyOf(await render([...WITH_URL, ...ranges]));
    const blocks = policy.egress.flatMap((rule) => rule.to.flatMap((peer) => (peer.ipBlock ? [peer.ipBlock] : [])));
    expect(blocks).toEqual([{ cidr: '0.0.0.0/0', except: [...privateRanges, '203.0.113.0/24'] }, { cidr: '10.20.0.15/32' }]);

    const offline = policyOf(await render([...WITH_URL, ...ranges, '--set', 'networkPolicy.allowInternet=false']));
    const offlineBlocks = offline.egress.flatMap((rule) => rule.to.flatMap((peer) => (peer.ipBlock ? [peer.ipBlock] : [])));
    expect(offlineBlocks).toEqual([{ cidr: '10.20.0.15/32' }]);
  });

  it('lives in the sandbox namespace, and can be turned off', async () => {
    const separate = await render([...WITH_URL, '--set', 'sandbox.namespace=sandboxes']);
    expect(separate.get('NetworkPolicy', name).metadata.namespace).toBe('sandboxes');
    const off = await render([...WITH_URL, '--set', 'networkPolicy.enabled=false'])
    expect(off.ofKind('NetworkPolicy').map((policy) => policy.metadata.name).sort()).toEqual([`${FULLNAME}-apiserver`, `${FULLNAME}-operator`]);
  });

  it('rejects a range that is not CIDR notation', async () => {
    expect(await renderError([...WITH_URL, '--set', 'networkPolicy.allowedCIDRs={10.0.0.1}'])).toContain(SCHEMA_ERROR);
  });
});

describe('the egress gateway', () => {
  const ENABLED = [...WITH_URL, '--set', 'egressGateway.enabled=true'];
  type Spec = {
    podSelector: { matchLabels: Record<string, string>; matchExpressions?: unknown[] };
    ingress: { from?: NetworkPolicyPeer[]; ports?: { protocol: string; port: number }[] }[];
    egress: { to?: NetworkPolicyPeer[]; ports?: { protocol: string; port: number }[] }[];
  };
  const spec = (rendered: Rendered, name: string) => rendered.get('NetworkPolicy', `${FULLNAME}-${name}`).spec as unknown as Spec;

  it('is off by default: no Service, no variables, the sandbox policy selects every sandbox', async () => {
    const rendered = await render();
    expect(rendered.find('Service', `${FULLNAME}-egress`)).toBeUndefined();
    expect(rendered.find('NetworkPolicy', `${FULLNAME}-sandboxes-egress`)).toBeUndefined();
    for (const component of ['apiserver', 'operator'] as const) {
      expect(rendered.env(component).has('BERTH_EGRESS_GATEWAY')).toBe(false);
      expect(rendered.env(component).has('BERTH_EGRESS_GATEWAY_PORT')).toBe(false);
    }
    expect(spec(rendered, 'sandboxes').podSelector).toEqual({ matchLabels: { 'berth.dev/sandbox': 'true' } });
  });

  it('is served by the operator behind a Service, and named to both processes', async () => {
    const rendered = await render([...ENABLED, '--set', 'sandbox.namespace=sandboxes']);
    const service = rendered.get('Service', `${FULLNAME}-egress`);
    expect(service.spec).toMatchObject({
      type: 'ClusterIP',
      selector: { 'app.kubernetes.io/name': 'berth', 'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/component': 'operator' },
      ports: [{ name: 'egress', port: 3128, targetPort: 'egress', protocol: 'TCP' }],
    });
    expect(rendered.container('operator').ports).toContainEqual({ name: 'egress', containerPort: 3128, protocol: 'TCP' });
    expect(rendered.env('operator').get('BERTH_EGRESS_GATEWAY_PORT')!.value).toBe('3128');
    for (const component of ['apiserver', 'operator'] as const) {
      expect(rendered.env(component).get('BERTH_EGRESS_GATEWAY')!.value).toBe(`${FULLNAME}-egress.${NAMESPACE}.svc:3128`);
    }
    // The operator reads that Service's ClusterIP (for the pods' proxy variables), and no other Service.
    const serviceRules = (args: string[]) =>
      render(args).then((output) => output.get('Role', `${FULLNAME}-operator`).rules!.filter((rule) => rule.resources?.includes('services')));
    expect(await serviceRules([...ENABLED, '--set', 'sandbox.namespace=sandboxes'])).toEqual([
      { apiGroups: [''], resources: ['services'], resourceNames: [`${FULLNAME}-egress`], verbs: ['get'] },
    ]);
    expect(await serviceRules(WITH_URL)).toEqual([]);
  });

  it('leaves the pods bound to it to a policy of their own, whose only way out is the gateway', async () => {
    const rendered = await render([...ENABLED, '--set', 'sandbox.namespace=sandboxes']);
    // NetworkPolicies add up: the internet rule of the sandbox policy must not select them.
    expect(spec(rendered, 'sandboxes').podSelector).toEqual({
      matchLabels: { 'berth.dev/sandbox': 'true' },
      matchExpressions: [{ key: 'berth.dev/egress', operator: 'NotIn', values: ['gateway'] }],
    });
    const bound = rendered.get('NetworkPolicy', `${FULLNAME}-sandboxes-egress`);
    expect(bound.metadata.namespace).toBe('sandboxes');
    expect(spec(rendered, 'sandboxes-egress')).toEqual({
      podSelector: { matchLabels: { 'berth.dev/sandbox': 'true', 'berth.dev/egress': 'gateway' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      // No DNS either: the pod is given the gateway's address.
      egress: [
        {
          to: [
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': NAMESPACE } },
              podSelector: { matchLabels: { 'app.kubernetes.io/name': 'berth', 'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/component': 'operator' } },
            },
          ],
          ports: [{ protocol: 'TCP', port: 3128 }],
        },
      ],
    });
  });

  it("opens the operator's policy to those pods on the gateway port, and the operator to public addresses", async () => {
    const rendered = await render([...ENABLED, '--set', 'sandbox.namespace=sandboxes', '--set', 'networkPolicy.componentsAllowInternet=false']);
    const operator = spec(rendered, 'operator');
    expect(operator.ingress).toContainEqual({
      ports: [{ protocol: 'TCP', port: 3128 }],
      from: [
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'sandboxes' } },
          podSelector: { matchLabels: { 'berth.dev/sandbox': 'true', 'berth.dev/egress': 'gateway' } },
        },
      ],
    });
    const publicRule = (policy: Spec) => policy.egress.some((rule) => rule.to?.some((peer) => peer.ipBlock?.cidr === '0.0.0.0/0'));
    expect(publicRule(operator)).toBe(true);
    // The API server is not the gateway: componentsAllowInternet=false still holds for it.
    expect(publicRule(spec(rendered, 'apiserver'))).toBe(false);
    expect(spec(await render([...WITH_URL, '--set', 'networkPolicy.componentsAllowInternet=false']), 'operator').ingress.map((rule) => rule.ports?.[0]?.port)).toEqual([9090]);
  });

  it('refuses a port outside 1-65535 and a mistyped key', async () => {
    expect(await renderError([...ENABLED, '--set', 'egressGateway.port=0'])).toContain(SCHEMA_ERROR);
    expect(await renderError([...ENABLED, '--set', 'egressGateway.prot=3128'])).toContain(SCHEMA_ERROR);
  });
});

describe('optional objects', () => {
  it('creates the gVisor RuntimeClass only when asked, and only for the class sandboxes use', async () => {
    const rendered = await render([...WITH_URL, '--set', 'runtimeClass.create=true', '--set', 'runtimeClass.nodeSelector.gvisor=enabled']);
    const runtimeClass = rendered.get('RuntimeClass', 'gvisor');
    expect(runtimeClass.apiVersion).toBe('node.k8s.io/v1');
    expect(runtimeClass.handler).toBe('runsc');
    expect((runtimeClass as unknown as { scheduling: unknown }).scheduling).toEqual({ nodeSelector: { gvisor: 'enabled' } });
    const mismatch = await renderError([...WITH_URL, '--set', 'runtimeClass.create=true', '--set', 'sandbox.runtimeClassName=kata']);
    expect(mismatch).toContain('runtimeClass.name ("gvisor") must equal sandbox.runtimeClassName ("kata")');
  });

  it('creates a ServiceMonitor for both components only when asked, scraping the metrics port of exactly the two metrics Services', async () => {
    const rendered = await render([...WITH_URL, '--set', 'serviceMonitor.enabled=true', '--set', 'serviceMonitor.labels.release=prometheus']);
    const monitor = rendered.get('ServiceMonitor', FULLNAME);
    expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(monitor.metadata.labels!.release).toBe('prometheus');
    // Without a timeout or relabelings, Prometheus's own defaults apply: the fields are absent.
    expect(monitor.spec!.endpoints).toEqual([{ port: 'metrics', path: '/metrics', interval: '30s' }]);
    const selector = monitor.spec!.selector as { matchLabels: Record<string, string> };
    const selected = rendered
      .ofKind('Service')
      .filter((service) => Object.entries(selector.matchLabels).every(([k, v]) => service.metadata.labels?.[k] === v));
    expect(selected.map((service) => service.metadata.name).sort()).toEqual([`${FULLNAME}-apiserver-metrics`, `${FULLNAME}-operator-metrics`]);
    for (const service of selected) {
      expect(service.spec!.ports).toEqual([{ name: 'metrics', port: 9090, targetPort: 'metrics', protocol: 'TCP' }]);
      const component = (service.spec!.selector as Record<string, string>)['app.kubernetes.io/component'] as 'apiserver' | 'operator';
      expect(rendered.container(component).ports).toContainEqual({ name: 'metrics', containerPort: 9090, protocol: 'TCP' });
    }
  });

  it('passes interval, scrapeTimeout, relabelings and metricRelabelings to the endpoint', async () => {
    const relabelings = [{ sourceLabels: ['__meta_kubernetes_pod_node_name'], targetLabel: 'node', action: 'replace' }];
    const metricRelabelings = [{ sourceLabels: ['__name__'], regex: 'nodejs_gc_.*', action: 'drop' }];
    const rendered = await render([
      ...WITH_URL,
      ...['--set', 'serviceMonitor.enabled=true', '--set', 'serviceMonitor.interval=15s', '--set', 'serviceMonitor.scrapeTimeout=5s'],
      ...['--set-json', `serviceMonitor.relabelings=${JSON.stringify(relabelings)}`],
      ...['--set-json', `serviceMonitor.metricRelabelings=${JSON.stringify(metricRelabelings)}`],
    ]);
    expect(rendered.get('ServiceMonitor', FULLNAME).spec!.endpoints).toEqual([
      { port: 'metrics', path: '/metrics', interval: '15s', scrapeTimeout: '5s', relabelings, metricRelabelings },
    ]);
    expect(await renderError([...WITH_URL, '--set', 'serviceMonitor.scrapeTimeout=5 seconds'])).toContain(SCHEMA_ERROR);
  });

  it('refuses a scrape timeout longer than the interval, comparing units', async () => {
    const monitor = (interval: string, timeout: string) => [
      ...WITH_URL,
      ...['--set', 'serviceMonitor.enabled=true', '--set', `serviceMonitor.interval=${interval}`, '--set', `serviceMonitor.scrapeTimeout=${timeout}`],
    ];
    expect(await renderError(monitor('1m', '1m30s'))).toContain('serviceMonitor.scrapeTimeout (1m30s) is longer than serviceMonitor.interval (1m)');
    expect(await renderError(monitor('900ms', '1s'))).toContain('is longer than serviceMonitor.interval');
    for (const [interval, timeout] of [['30s', '500ms'], ['1m30s', '1m30s'], ['1h', '59m']] as const) {
      const endpoints = (await render(monitor(interval, timeout))).get('ServiceMonitor', FULLNAME).spec!.endpoints as { interval: string; scrapeTimeout: string }[];
      expect(endpoints[0]).toMatchObject({ interval, scrapeTimeout: timeout });
    }
  });
});

describe('BYOI and the remote provider protocol', () => {
  it('pass the BYOI address policy to both processes, and the provider tokens to the operator only when named', async () => {
    const defaults = await render(WITH_URL);
    for (const component of ['apiserver', 'operator'] as const) {
      expect(defaults.env(component).get('BERTH_BYOI_ALLOW_HTTP')!.value).toBe('false');
      expect(defaults.env(component).get('BERTH_BYOI_ALLOW_PRIVATE')!.value).toBe('false');
    }
    expect(defaults.env('operator').has('BERTH_PROVIDER_TOKENS')).toBe(false);
    const serving = await render([...WITH_URL, '--set', 'remoteProvider.tokensSecret=berth-provider-tokens', '--set', 'byoi.allowPrivate=true']);
    expect(serving.env('operator').get('BERTH_PROVIDER_TOKENS')!.valueFrom!.secretKeyRef).toEqual({ name: 'berth-provider-tokens', key: 'BERTH_PROVIDER_TOKENS' });
    expect(serving.env('apiserver').has('BERTH_PROVIDER_TOKENS')).toBe(false);
    expect(serving.env('apiserver').get('BERTH_BYOI_ALLOW_PRIVATE')!.value).toBe('true');
  });
});

describe('the E2B-compatible API', () => {
  it('passes its domain to the API server and routes api.<domain> and *.<domain> to it through an Ingress', async () => {
    const defaults = await render(WITH_URL);
    expect(defaults.env('apiserver').has('BERTH_E2B_DOMAIN')).toBe(false);
    expect(defaults.ofKind('Ingress')).toEqual([]);
    const rendered = await render([
      ...WITH_URL,
      '--set', 'e2b.domain=sandboxes.example.com',
      '--set', 'e2b.ingress.enabled=true',
      '--set', 'e2b.ingress.className=nginx',
      '--set', 'e2b.ingress.tlsSecretName=sandboxes-wildcard',
    ]);
    expect(rendered.env('apiserver').get('BERTH_E2B_DOMAIN')!.value).toBe('sandboxes.example.com');
    expect(rendered.env('operator').has('BERTH_E2B_DOMAIN')).toBe(false);
    const ingress = rendered.get('Ingress', `${FULLNAME}-e2b`);
    const spec = ingress.spec as {
      ingressClassName: string;
      tls: { hosts: string[]; secretName: string }[];
      rules: { host: string; http: { paths: { path: string; backend: { service: { name: string; port: { name: string } } } }[] } }[];
    };
    expect(spec.ingressClassName).toBe('nginx');
    expect(spec.tls).toEqual([{ hosts: ['*.sandboxes.example.com'], secretName: 'sandboxes-wildcard' }]);
    expect(spec.rules.map((rule) => rule.host)).toEqual(['api.sandboxes.example.com', '*.sandboxes.example.com']);
    for (const rule of spec.rules) expect(rule.http.paths[0]!.backend.service).toEqual({ name: `${FULLNAME}-apiserver`, port: { name: 'http' } });
  });

  it('refuses an Ingress without a domain, and a domain that is not one', async () => {
    expect(await renderError([...WITH_URL, '--set', 'e2b.ingress.enabled=true'])).toContain('e2b.ingress.enabled needs e2b.domain');
    expect(await renderError([...WITH_URL, '--set', 'e2b.domain=Not_A_Domain'])).toContain(SCHEMA_ERROR);
  });
});

describe('the secrets key', () => {
  it('is generated into a kept Secret that both processes read, unless an existing Secret is named', async () => {
    const rendered = await render(WITH_URL);
    const secret = rendered.get('Secret', `${FULLNAME}-secrets-key`);
    expect(Buffer.from(Buffer.from(secret.data!.BERTH_SECRETS_KEY!, 'base64').toString(), 'base64')).toHaveLength(32);
    expect(secret.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
    for (const component of ['apiserver', 'operator'] as const) {
      expect(rendered.env(component).get('BERTH_SECRETS_KEY')!.valueFrom!.secretKeyRef).toEqual({ name: `${FULLNAME}-secrets-key`, key: 'BERTH_SECRETS_KEY' });
    }
    const own = await render([...WITH_URL, '--set', 'secrets.existingSecret=my-key']);
    expect(own.ofKind('Secret').map((object) => object.metadata.name)).not.toContain(`${FULLNAME}-secrets-key`);
    expect(own.env('operator').get('BERTH_SECRETS_KEY')!.valueFrom!.secretKeyRef).toEqual({ name: 'my-key', key: 'BERTH_SECRETS_KEY' });
    expect(own.env('operator').get('BERTH_SECRETS_PREVIOUS_KEYS')!.valueFrom!.secretKeyRef).toEqual({ name: 'my-key', key: 'BERTH_SECRETS_PREVIOUS_KEYS', optional: true });
  });
});

describe('webhooks', () => {
  it('allow only https and public addresses by default, and pass the install\'s choice to both processes', async () => {
    const defaults = await render(WITH_URL);
    const open = await render([...WITH_URL, '--set', 'webhooks.allowHttp=true', '--set', 'webhooks.allowPrivate=true']);
    for (const component of ['apiserver', 'operator'] as const) {
      expect(defaults.env(component).get('BERTH_WEBHOOK_ALLOW_HTTP')!.value).toBe('false');
      expect(defaults.env(component).get('BERTH_WEBHOOK_ALLOW_PRIVATE')!.value).toBe('false');
      expect(open.env(component).get('BERTH_WEBHOOK_ALLOW_HTTP')!.value).toBe('true');
      expect(open.env(component).get('BERTH_WEBHOOK_ALLOW_PRIVATE')!.value).toBe('true');
    }
    expect(await renderError([...WITH_URL, '--set', 'webhooks.allowPrivate=maybe'])).toContain(SCHEMA_ERROR);
  });
});

describe('pricing', () => {
  it('keeps the built-in prices by default and passes an install\'s own to both processes', async () => {
    const defaults = await render(WITH_URL);
    for (const component of ['apiserver', 'operator'] as const) {
      const env = defaults.env(component);
      expect(env.get('BERTH_CURRENCY')!.value).toBe('usd');
      for (const name of ['BERTH_MODEL_PRICES', 'BERTH_COMPUTE_PRICES', 'BERTH_STORAGE_PRICE']) expect(env.has(name), name).toBe(false);
    }
    const compute = { '*': { python: '0.0020', gpu: { a100: '0.0500' } }, kubernetes: { node: '0.0015' } };
    const models = { 'openai/gpt-4o': { input: '2.00', output: '8.00' } };
    const rendered = await render([
      ...WITH_URL,
      ...['--set-json', `pricing.compute=${JSON.stringify(compute)}`, '--set-json', `pricing.models=${JSON.stringify(models)}`],
      ...['--set', 'pricing.storagePerGbHour=0.0002', '--set', 'pricing.currency=eur'],
    ]);
    for (const component of ['apiserver', 'operator'] as const) {
      const env = rendered.env(component);
      expect(JSON.parse(env.get('BERTH_COMPUTE_PRICES')!.value!)).toEqual(compute);
      expect(JSON.parse(env.get('BERTH_MODEL_PRICES')!.value!)).toEqual(models);
      expect(env.get('BERTH_STORAGE_PRICE')!.value).toBe('0.0002');
      expect(env.get('BERTH_CURRENCY')!.value).toBe('eur');
    }
  });

  it('refuses prices that are numbers or not exact decimals', async () => {
    for (const bad of [
      ['--set-json', 'pricing.compute={"*":{"python":0.001}}'],
      ['--set-json', 'pricing.compute={"*":{"cobol":"1"}}'],
      ['--set', 'pricing.storagePerGbHour=cheap'],
      ['--set', 'pricing.currency=USD'],
    ]) {
      expect(await renderError([...WITH_URL, ...bad]), bad.join(' ')).toContain(SCHEMA_ERROR);
    }
  });
});

describe('snapshot storage', () => {
  const snapshotVolume = (rendered: Rendered) =>
    rendered.podTemplate('Deployment', `${FULLNAME}-operator`).spec.volumes?.find((volume) => volume.name === 'snapshots');

  it('keeps archives in a directory on a volume of the operator by default, and warns that an emptyDir is lost with the pod', async () => {
    const rendered = await render(WITH_URL);
    const operator = rendered.env('operator');
    expect(operator.get('BERTH_SNAPSHOT_STORAGE')!.value).toBe('directory');
    expect(operator.get('BERTH_SNAPSHOT_DIR')!.value).toBe('/var/lib/berth/snapshots');
    expect(rendered.container('operator').volumeMounts).toContainEqual({ name: 'snapshots', mountPath: '/var/lib/berth/snapshots' });
    expect(snapshotVolume(rendered)).toEqual({ name: 'snapshots', emptyDir: {} });
    // Only the operator touches archives.
    expect(rendered.env('apiserver').has('BERTH_SNAPSHOT_STORAGE')).toBe(false);

    const claimed = await render([...WITH_URL, '--set', 'snapshots.directory.existingClaim=berth-snapshots']);
    expect(snapshotVolume(claimed)).toEqual({ name: 'snapshots', persistentVolumeClaim: { claimName: 'berth-snapshots' } });

    const notes = async (args: string[]) => {
      const result = await run(['install', RELEASE, CHART, '--namespace', NAMESPACE, '--dry-run=client', ...args], {
        ...process.env,
        KUBECONFIG: '/nonexistent',
      });
      expect(result.code, result.stderr).toBe(0);
      return result.stdout.slice(result.stdout.indexOf('NOTES:'));
    };
    expect(await notes(WITH_URL)).toContain('snapshots of paused agents are kept in an emptyDir');
    expect(await notes([...WITH_URL, '--set', 'snapshots.directory.existingClaim=berth-snapshots'])).not.toContain('emptyDir');
  });

  it('passes an S3 bucket, its endpoint and credentials from a Secret to the operator', async () => {
    const rendered = await render([
      ...WITH_URL,
      ...['--set', 'snapshots.storage=s3', '--set', 'snapshots.s3.bucket=berth-snapshots', '--set', 'snapshots.s3.region=eu-west-1'],
      ...['--set', 'snapshots.s3.endpoint=http://minio.storage:9000', '--set', 'snapshots.s3.credentialsSecret=berth-s3'],
    ]);
    const operator = rendered.env('operator');
    const value = (name: string) => operator.get(name)?.value;
    expect(value('BERTH_SNAPSHOT_STORAGE')).toBe('s3');
    expect(value('BERTH_S3_BUCKET')).toBe('berth-snapshots');
    expect(value('BERTH_S3_PREFIX')).toBe('snapshots/');
    expect(value('BERTH_S3_REGION')).toBe('eu-west-1');
    expect(value('BERTH_S3_ENDPOINT')).toBe('http://minio.storage:9000');
    expect(operator.has('BERTH_SNAPSHOT_DIR')).toBe(false);
    expect(operator.get('AWS_ACCESS_KEY_ID')!.valueFrom!.secretKeyRef).toEqual({ name: 'berth-s3', key: 'AWS_ACCESS_KEY_ID' });
    expect(operator.get('AWS_SECRET_ACCESS_KEY')!.valueFrom!.secretKeyRef).toEqual({ name: 'berth-s3', key: 'AWS_SECRET_ACCESS_KEY' });
    expect(operator.get('AWS_SESSION_TOKEN')!.valueFrom!.secretKeyRef).toEqual({ name: 'berth-s3', key: 'AWS_SESSION_TOKEN', optional: true });
    expect(snapshotVolume(rendered)).toBeUndefined();

    // Without a credentials Secret the AWS SDK's own chain applies (workload identity).
    const ambient = await render([...WITH_URL, '--set', 'snapshots.storage=s3', '--set', 'snapshots.s3.bucket=berth-snapshots']);
    expect(ambient.env('operator').has('AWS_ACCESS_KEY_ID')).toBe(false);
    expect(ambient.env('operator').has('BERTH_S3_ENDPOINT')).toBe(false);
  });

  it('refuses s3 storage without a bucket, and values outside the schema', async () => {
    expect(await renderError([...WITH_URL, '--set', 'snapshots.storage=s3'])).toContain('set snapshots.s3.bucket');
    for (const bad of ['snapshots.storage=gcs', 'snapshots.s3.bucket=Not_A_Bucket', 'snapshots.s3.endpoint=minio:9000']) {
      expect(await renderError([...WITH_URL, '--set', bad]), bad).toContain(SCHEMA_ERROR);
    }
  });
});

describe('the database', () => {
  it('bundled: a StatefulSet, a headless Service and a generated password the processes use', async () => {
    const rendered = await render(['--set', 'postgresql.bundled.enabled=true', '--set', 'postgresql.bundled.storage.storageClassName=fast']);
    const name = `${FULLNAME}-postgresql`;
    const statefulSet = rendered.get('StatefulSet', name);
    expect(rendered.get('Service', name).spec!.clusterIP).toBe('None');
    expect(statefulSet.spec!.serviceName).toBe(name);
    const claims = statefulSet.spec!.volumeClaimTemplates as { spec: { storageClassName?: string; resources: unknown } }[];
    expect(claims[0]!.spec).toMatchObject({ storageClassName: 'fast', resources: { requests: { storage: '8Gi' } } });

    const secret = rendered.get('Secret', name);
    const decoded = (key: string) => Buffer.from(secret.data![key]!, 'base64').toString();
    const password = decoded('password');
    expect(password).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(decoded('DATABASE_URL')).toBe(`postgresql://berth:${password}@${name}.${NAMESPACE}.svc:5432/berth`);
    // The password must outlive the release: the data volume it opens does.
    expect(secret.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');

    const postgres = rendered.podTemplate('StatefulSet', name).spec.containers[0]!;
    expect(postgres.image).toBe('postgres:17-alpine');
    expect(postgres.env!.find((v) => v.name === 'POSTGRES_PASSWORD')!.valueFrom!.secretKeyRef).toEqual({ name, key: 'password' });
    for (const component of ['apiserver', 'operator'] as const) {
      expect(rendered.env(component).get('DATABASE_URL')!.valueFrom!.secretKeyRef).toEqual({ name, key: 'DATABASE_URL' });
    }
    expect(rendered.find('Secret', `${FULLNAME}-database`)).toBeUndefined();
  });

  it('existingSecret: the processes read it, and the chart renders no database Secret', async () => {
    const rendered = await render(['--set', 'postgresql.existingSecret=my-db', '--set', 'postgresql.existingSecretKey=url']);
    for (const component of ['apiserver', 'operator'] as const) {
      expect(rendered.env(component).get('DATABASE_URL')!.valueFrom!.secretKeyRef).toEqual({ name: 'my-db', key: 'url' });
    }
    expect(rendered.ofKind('Secret').map((secret) => secret.metadata.name)).toEqual([`${FULLNAME}-secrets-key`]);
    expect(rendered.ofKind('StatefulSet')).toEqual([]);
  });

  it('refuses to render with no database configuration', async () => {
    const error = await renderError([]);
    expect(error).toContain(DATABASE_ERROR);
    expect(error).toContain('none is set');
  });

  it('refuses to render with two', async () => {
    const error = await renderError([...WITH_URL, '--set', 'postgresql.bundled.enabled=true']);
    expect(error).toContain(DATABASE_ERROR);
    expect(error).toContain('2 are set: postgresql.bundled.enabled, postgresql.url');
  });
});

describe('the values schema', () => {
  it('rejects a mistyped key', async () => {
    const error = await renderError([...WITH_URL, '--set', 'apiserver.replica=3']);
    expect(error).toContain(SCHEMA_ERROR);
    expect(error).toContain('replica');
  });

  it('rejects a wrong type', async () => {
    const error = await renderError([...WITH_URL, '--set', 'apiserver.replicas=two']);
    expect(error).toContain(SCHEMA_ERROR);
    expect(error).toContain('replicas');
  });

  it('rejects values outside a closed set or format', async () => {
    for (const bad of ['logLevel=verbose', 'sandbox.execTimeout=2 minutes', 'sandbox.resources.memoryLimit=1GB', 'apiserver.service.type=Ingress']) {
      expect(await renderError([...WITH_URL, '--set', bad]), bad).toContain(SCHEMA_ERROR);
    }
  });

  it('rejects an unknown key in a GPU type', async () => {
    const error = await renderError([...WITH_URL, '--set', 'sandbox.gpuTable.t4.cont=2']);
    expect(error).toContain(SCHEMA_ERROR);
  });
});

describe('the node agent', () => {
  const ENABLED = [...WITH_URL, '--set', 'nodeAgent.enabled=true'];

  it('is off by default: no DaemonSet, no token, nothing cluster-wide, no agent port for either process', async () => {
    const rendered = await render();
    expect(rendered.ofKind('DaemonSet')).toEqual([]);
    expect(rendered.find('Secret', `${FULLNAME}-node-agent-token`)).toBeUndefined();
    for (const component of ['apiserver', 'operator'] as const) expect(rendered.env(component).has('BERTH_NODE_AGENT_PORT')).toBe(false);
  });

  it('runs `berth node` on the host network of every selected node, with the host paths it needs and no API credentials', async () => {
    const rendered = await render([...ENABLED, '--set-string', 'nodeAgent.nodeSelector.gvisor=true', '--set', 'nodeAgent.port=9555']);
    const template = rendered.podTemplate('DaemonSet', `${FULLNAME}-node-agent`) as PodTemplate & { spec: Record<string, unknown> };
    expect(template.spec).toMatchObject({ hostNetwork: true, hostPID: true, automountServiceAccountToken: false, nodeSelector: { gvisor: 'true' } });
    const container = template.spec.containers[0]!;
    expect(container.args).toEqual(['node']);
    expect(container.image).toBe(rendered.container('operator').image);
    const env = new Map((container.env ?? []).map((variable) => [variable.name, variable]));
    expect(env.get('BERTH_HOST')!.valueFrom!.fieldRef).toEqual({ fieldPath: 'status.hostIP' });
    expect(env.get('BERTH_NODE_NAME')!.valueFrom!.fieldRef).toEqual({ fieldPath: 'spec.nodeName' });
    expect(env.get('BERTH_NODE_AGENT_PORT')!.value).toBe('9555');
    expect(env.get('BERTH_NODE_AGENT_TOKEN')!.valueFrom!.secretKeyRef).toEqual({ name: `${FULLNAME}-node-agent-token`, key: 'BERTH_NODE_AGENT_TOKEN' });
    const volumes = (template.spec.volumes as { name: string; hostPath: { path: string } }[]).map((volume) => [volume.name, volume.hostPath.path]);
    expect(volumes).toEqual([
      ['runsc-root', '/run/containerd/runsc/k8s.io'],
      ['containerd-tasks', '/run/containerd/io.containerd.runtime.v2.task'],
      ['kubelet-pods', '/var/lib/kubelet/pods'],
      ['state', '/var/lib/berth-node'],
      ['runsc', '/usr/local/bin/runsc'],
    ]);
    // Under the node's default runtime unless told: inside gVisor it could not drive the host's runsc.
    expect(template.spec.runtimeClassName).toBeUndefined();
    const runc = await render([...ENABLED, '--set', 'nodeAgent.runtimeClassName=runc']);
    expect((runc.podTemplate('DaemonSet', `${FULLNAME}-node-agent`) as PodTemplate & { spec: Record<string, unknown> }).spec.runtimeClassName).toBe('runc');
    const token = rendered.get('Secret', `${FULLNAME}-node-agent-token`);
    expect(Buffer.from(token.data!.BERTH_NODE_AGENT_TOKEN!, 'base64').toString().length).toBeGreaterThanOrEqual(32);
  });

  it('gives the operator the port and token, the API server the port only, and the operator read access to nodes', async () => {
    const rendered = await render(ENABLED);
    expect(rendered.env('operator').get('BERTH_NODE_AGENT_PORT')!.value).toBe('9190');
    expect(rendered.env('operator').get('BERTH_NODE_AGENT_TOKEN')!.valueFrom!.secretKeyRef!.name).toBe(`${FULLNAME}-node-agent-token`);
    expect(rendered.env('apiserver').get('BERTH_NODE_AGENT_PORT')!.value).toBe('9190');
    expect(rendered.env('apiserver').has('BERTH_NODE_AGENT_TOKEN')).toBe(false);
    const [role] = rendered.ofKind('ClusterRole');
    expect(role!.rules).toEqual([{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list'] }]);
    const [binding] = rendered.ofKind('ClusterRoleBinding');
    expect(binding!.subjects).toEqual([{ kind: 'ServiceAccount', name: `${FULLNAME}-operator`, namespace: NAMESPACE }]);
    expect(binding!.roleRef!.name).toBe(role!.metadata.name);
  });

  it('reads an existing token Secret instead of generating one, and refuses a mistyped value', async () => {
    const rendered = await render([...ENABLED, '--set', 'nodeAgent.existingTokenSecret=agent-token']);
    expect(rendered.find('Secret', `${FULLNAME}-node-agent-token`)).toBeUndefined();
    expect(rendered.env('operator').get('BERTH_NODE_AGENT_TOKEN')!.valueFrom!.secretKeyRef!.name).toBe('agent-token');
    expect(await renderError([...ENABLED, '--set', 'nodeAgent.stateDir=relative/dir'])).toContain(SCHEMA_ERROR);
    expect(await renderError([...ENABLED, '--set', 'nodeAgent.prot=1'])).toContain(SCHEMA_ERROR);
  });
});

describe('the release notes', () => {
  it('say how to create an API key and reach the API', async () => {
    // A client-side dry run renders NOTES.txt without a cluster; the kubeconfig must not matter.
    const result = await run(
      ['install', RELEASE, CHART, '--namespace', NAMESPACE, '--dry-run=client', ...WITH_URL],
      { ...process.env, KUBECONFIG: '/nonexistent' },
    );
    expect(result.code, result.stderr).toBe(0);
    const notes = result.stdout.slice(result.stdout.indexOf('NOTES:'));
    expect(notes).toContain(`kubectl -n ${NAMESPACE} exec deploy/${FULLNAME}-apiserver -- berth keys create`);
    expect(notes).toContain(`kubectl -n ${NAMESPACE} port-forward service/${FULLNAME}-apiserver 8080:8080`);
  });
});
