import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, kubectl } from './helpers.js';

/** The CRDs on a real API server: its schema validation, not ours, refuses bad specs. */
let namespace: string;

beforeAll(async () => {
  namespace = await createNamespace('crds');
});
afterAll(async () => {
  await kubectl(['delete', 'namespace', namespace, '--wait=false']);
});

const agent = (name: string, spec: Record<string, unknown>) =>
  JSON.stringify({
    apiVersion: 'berth.dev/v1alpha1',
    kind: 'Agent',
    metadata: { name, namespace },
    spec: {
      sessionId: 'ses_x',
      organizationId: 'org_x',
      mode: 'test',
      userId: 'u',
      desiredState: 'active',
      compute: 'python',
      browser: false,
      tools: [],
      timeout: '15m',
      timeoutSeconds: 900,
      provider: 'kubernetes',
      ...spec,
    },
  });

describe('Berth CRDs on the API server', () => {
  it('accept a valid Agent and list it with the printer columns', async () => {
    const created = await kubectl(['apply', '-f', '-'], agent('agt-valid', {}));
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const listed = await kubectl(['get', 'agents', '-n', namespace]);
    expect(listed.stdout.split('\n')[0]).toMatch(/^NAME\s+SESSION\s+PHASE\s+COMPUTE\s+PROVIDER\s+COST\s+AGE$/);
    expect(listed.stdout).toMatch(/agt-valid\s+ses_x\s+python\s+kubernetes/);
    const byShortName = await kubectl(['get', 'agt', '-n', namespace, '-o', 'name']);
    expect(byShortName.stdout.trim()).toBe('agent.berth.dev/agt-valid');
    const byCategory = await kubectl(['get', 'berth', '-n', namespace, '-o', 'name']);
    expect(byCategory.stdout).toContain('agent.berth.dev/agt-valid');
  });

  it.each([
    ['an unknown compute', { compute: 'ruby' }, 'spec.compute'],
    ['a timeout that is not a duration', { timeout: '5x' }, 'spec.timeout'],
    ['an empty timeout', { timeout: '' }, 'spec.timeout'],
    ['an unknown mode', { mode: 'prod' }, 'spec.mode'],
    ['a fractional cost cap', { costCap: { amount: 1.5, currency: 'usd' } }, 'spec.costCap.amount'],
    ['an upper-case currency', { costCap: { amount: 100, currency: 'USD' } }, 'spec.costCap.currency'],
    ['a missing session', { sessionId: undefined }, 'spec.sessionId'],
  ])('refuse an Agent with %s', async (_name, change, field) => {
    const response = await kubectl(['apply', '-f', '-'], agent(`agt-bad-${Math.random().toString(36).slice(2, 8)}`, change));
    expect(response.code).not.toBe(0);
    expect(response.stderr).toContain(field);
  });

  it('refuse fields the schema does not know, with strict validation', async () => {
    const response = await kubectl(['apply', '--validate=strict', '-f', '-'], agent('agt-unknown-field', { colour: 'red' }));
    expect(response.code).not.toBe(0);
    expect(response.stderr).toContain('colour');
  });

  it('give every kind a short name and the status subresource', async () => {
    for (const shortName of ['ses', 'agt', 'snap', 'sched', 'flt']) {
      const result = await kubectl(['get', shortName, '-n', namespace]);
      expect(result.code, result.stderr).toBe(0);
    }
    const crd = JSON.parse((await kubectl(['get', 'crd', 'agents.berth.dev', '-o', 'json'])).stdout);
    expect(crd.spec.versions[0].subresources).toEqual({ status: {} });
  });
});
