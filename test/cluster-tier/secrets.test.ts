import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { kubectl, kubectlJson, startBerthInCluster, waitForAgent, type BerthInCluster } from './helpers.js';

/** Secrets in cluster mode: a Secret beside the sandbox pod, read through envFrom; no value in the pod spec. */
let berth: BerthInCluster;

beforeAll(async () => {
  berth = await startBerthInCluster({ prefix: 'secrets' });
});
afterAll(async () => {
  await berth.stop();
});

describe('secrets in cluster mode', () => {
  it("gives the pod the agent's secrets from a Secret it owns, and deletes it with the pod", async () => {
    const value = `cluster-${Date.now()}-value`;
    expect((await berth.live.post('/v1/secrets', { DEPLOY_TOKEN: value, UNUSED: 'u' })).body).toEqual({ ok: true, count: 2 });
    const session = (await berth.live.post('/v1/sessions', { userId: 'cluster-secrets' })).body;
    const agent = (await berth.live.post(`/v1/sessions/${session.id}/agents`, { secrets: ['DEPLOY_TOKEN'] })).body;
    await waitForAgent(berth.live, agent.id, 'idle');
    const name = agent.id.replace('_', '-');

    const secret = await kubectlJson(['get', 'secret', `${name}-env`, '-n', berth.namespace]);
    expect(Object.keys(secret.data)).toEqual(['DEPLOY_TOKEN']);
    expect(Buffer.from(secret.data.DEPLOY_TOKEN, 'base64').toString()).toBe(value);
    const pod = await kubectlJson(['get', 'pod', name, '-n', berth.namespace]);
    expect(pod.spec.containers[0].envFrom).toEqual([{ secretRef: { name: `${name}-env` } }]);
    expect(JSON.stringify(pod)).not.toContain(value);
    const resource = await kubectlJson(['get', 'agent', name, '-n', berth.namespace]);
    expect(JSON.stringify(resource)).not.toContain(value);

    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
    await eventually(async () => ((await kubectl(['get', 'secret', `${name}-env`, '-n', berth.namespace])).code !== 0 ? true : undefined), {
      what: 'the env Secret to be deleted',
    });
  });
});
