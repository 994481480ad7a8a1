import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { kubectlJson, startBerthInCluster, startClusterProcess, waitForAgent, type BerthInCluster } from './helpers.js';

/** Two operator replicas share a Lease: one reconciles, the other takes over when it dies. */
let berth: BerthInCluster;

beforeAll(async () => {
  berth = await startBerthInCluster({ prefix: 'leader', operators: 2 });
});
afterAll(async () => {
  await berth.stop();
});

const holder = async (namespace: string) => {
  const lease = await kubectlJson(['get', 'lease', 'berth-operator', '-n', namespace]);
  return lease.spec.holderIdentity as string | undefined;
};

describe('leader election', () => {
  it('elects one leader, and only it reconciles', async () => {
    const leader = await eventually(async () => (await holder(berth.namespace)) || undefined);
    expect(['operator-0', 'operator-1']).toContain(leader);
    const sessionId = (await berth.live.post('/v1/sessions', { userId: 'leader' })).body.id;
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    await waitForAgent(berth.live, agent.id, 'idle');
    const leaderOutput = berth.operators.find((_, index) => `operator-${index}` === leader)!.output();
    const followerOutput = berth.operators.find((_, index) => `operator-${index}` !== leader)!.output();
    expect(leaderOutput).toContain('became the leader');
    expect(followerOutput).not.toContain('became the leader');
    expect(followerOutput).not.toContain('"msg":"agent ready"');
  });

  it('fails over when the leader dies', async () => {
    const leader = (await holder(berth.namespace))!;
    const index = Number(leader.split('-')[1]);
    await berth.operators[index]!.stop('SIGKILL');
    const successor = await eventually(
      async () => {
        const current = await holder(berth.namespace);
        return current && current !== leader ? current : undefined;
      },
      { timeoutMs: 40_000, what: 'another replica to take the lease' },
    );
    expect(successor).toBe(`operator-${1 - index}`);
    const sessionId = (await berth.live.post('/v1/sessions', { userId: 'after-failover' })).body.id;
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    await waitForAgent(berth.live, agent.id, 'idle');
    berth.operators[index] = await startClusterProcess('operator', { ...berth.env, POD_NAME: `operator-${index}` });
  });

  it('hands the lease over at once on a graceful stop', async () => {
    const leader = (await holder(berth.namespace))!;
    const index = Number(leader.split('-')[1]);
    const started = Date.now();
    expect(await berth.operators[index]!.stop('SIGTERM')).toBe(0);
    await eventually(
      async () => {
        const current = await holder(berth.namespace);
        return current && current !== leader ? current : undefined;
      },
      { timeoutMs: 15_000, what: 'the lease to pass on' },
    );
    // Well inside the 15 s lease duration: the stopped leader released the lease.
    expect(Date.now() - started).toBeLessThan(10_000);
    berth.operators[index] = await startClusterProcess('operator', { ...berth.env, POD_NAME: `operator-${index}` });
  });

  it('stops both replicas when both are stopped at once, even if the follower wins the released lease', async () => {
    await eventually(async () => (await holder(berth.namespace)) || undefined);
    const started = Date.now();
    const codes = await Promise.all(berth.operators.map((operator) => operator.stop('SIGTERM')));
    expect(codes).toEqual([0, 0]);
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
