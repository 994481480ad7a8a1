import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../common/src/index.js';
import { eventually } from '../helpers/http.js';
import { kubectl, kubectlJson, startBerthInCluster, type BerthInCluster } from './helpers.js';

/**
 * The operator as BYOI compute: it serves the remote provider protocol on its metrics port and
 * runs what it is asked for as sandbox pods, here called the way another Berth install would.
 */
const TOKEN = 'cluster-provider-token-0123456789';
let berth: BerthInCluster;
let base: string;

beforeAll(async () => {
  berth = await startBerthInCluster({ prefix: 'served', env: { BERTH_PROVIDER_TOKENS: TOKEN } });
  base = `${berth.operators[0]!.url}/provider/v1`;
});
afterAll(async () => {
  await berth.stop();
});

const call = async (method: string, path: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, body: await response.json() };
};

describe('the operator serving the remote provider protocol', () => {
  it('provisions a sandbox pod for a caller, reports it running, and deletes it', async () => {
    expect((await call('GET', '/capabilities')).body).toMatchObject({ protocol: 1, provider: 'kubernetes' });
    const agentId = newId('agt');
    const request = { agentId, sessionId: 'ses_elsewhere', timeoutSeconds: 600, compute: 'python', browser: false, env: {} };
    const first = await call('POST', '/sandboxes', request);
    expect([201, 202]).toContain(first.status);
    await eventually(async () => ((await call('POST', '/sandboxes', request)).status === 201 ? true : undefined), { what: 'the pod running' });
    expect((await call('GET', `/sandboxes/${agentId}`)).body).toEqual({ id: agentId, state: 'running' });
    const pod = await kubectlJson(['get', 'pod', agentId.replace('_', '-'), '-n', berth.namespace]);
    expect(pod.metadata.labels['berth.dev/sandbox']).toBe('true');
    expect((await call('DELETE', `/sandboxes/${agentId}`)).body).toEqual({ ok: true });
    await eventually(async () => ((await kubectl(['get', 'pod', agentId.replace('_', '-'), '-n', berth.namespace])).code !== 0 ? true : undefined), {
      what: 'the pod deleted',
    });
    expect((await fetch(`${base}/capabilities`)).status).toBe(401);
  });
});
