import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { kubectl, kubectlJson, startBerthInCluster, startClusterProcess, type BerthInCluster, type ClusterProcess } from '../cluster-tier/helpers.js';
import { nodeAgentSettings } from '../node/node-agent-settings.js';

/**
 * Warm pools on the real node (ADR 53): the pool's sandboxes are gVisor pods whose launcher runs
 * before any agent exists; an agent created with a secret adopts one, and the secret reaches the
 * programs it execs through the launcher while the pod's spec never holds it; the pool starts a
 * new pod; deleting the session removes the adopted pod and its gVisor sandbox; a native pause
 * and resume of an adopted pod (it keeps its `wsb-…` name until then) keeps its processes.
 */
const unavailable = inject('realNodeUnavailable');
const objectName = (id: string) => id.replace('_', '-');

function runsc(args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile('/usr/local/bin/runsc', [`--root=${inject('runscRoot')}`, ...args], (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout))),
  );
}

type Pod = { metadata: { name: string; uid: string; labels: Record<string, string> }; spec: any; status: any };

describe.skipIf(unavailable !== '')('warm pools on a real node', () => {
  let berth: BerthInCluster;
  let nodeAgent: ClusterProcess | undefined;
  let poolId: string;
  const secret = `warm-${Date.now()}-secret`;

  const warmPods = async (): Promise<Pod[]> => (await kubectlJson<{ items: Pod[] }>(['get', 'pods', '-n', berth.namespace, '-l', 'berth.dev/warm=true'])).items;
  /** The pool full again (after `claims` claims, when given). */
  const readyPool = (claims?: number) =>
    eventually(
      async () => {
        const pool = (await berth.live.get(`/v1/warm-pools/${poolId}`)).body;
        return pool.ready === 2 && (claims === undefined || pool.claims === claims) ? pool : undefined;
      },
      { what: `the pool to hold 2 ready pods after ${claims ?? 'any'} claims`, timeoutMs: 180_000, intervalMs: 250 },
    );

  beforeAll(async () => {
    const settings = await nodeAgentSettings(inject('runscRoot'));
    nodeAgent = await startClusterProcess('node', settings.env);
    berth = await startBerthInCluster({ prefix: 'nodewarm', env: { BERTH_NODE_AGENT_PORT: String(settings.port), BERTH_NODE_AGENT_TOKEN: settings.token } });
    expect((await berth.live.post('/v1/secrets', { WARM_TOKEN: secret })).body).toEqual({ ok: true, count: 1 });
    const created = await berth.live.post('/v1/warm-pools', { compute: 'python', size: 2 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    poolId = created.body.id;
    await readyPool(0);
  }, 300_000);
  afterAll(async () => {
    await berth?.stop();
    await nodeAgent?.stop();
  });

  it("gives a gVisor pod of the pool to a new agent, whose programs see its secret while the pod spec does not hold it; the pool refills; the session's deletion removes the pod", async () => {
    const before = await warmPods();
    expect(before).toHaveLength(2);
    for (const pod of before) {
      expect(pod.spec.runtimeClassName).toBe('gvisor');
      expect(pod.spec.nodeName).toBe('berth-node');
      expect(pod.status.phase).toBe('Running');
    }
    const session = (await berth.live.post('/v1/sessions', { userId: 'warm-node-user' })).body.id as string;
    const started = performance.now();
    const agent = (await berth.live.post(`/v1/sessions/${session}/agents`, { secrets: ['WARM_TOKEN'], timeout: '30m' })).body;
    const idle = (await berth.live.get(`/v1/agents/${agent.id}?waitFor=idle&waitSeconds=60`)).body;
    const claimMs = performance.now() - started;
    expect(idle.status, JSON.stringify(idle)).toBe('idle');
    expect(idle.conditions[0].message).toBe(`the sandbox is running (claimed from warm pool ${poolId})`);

    const [adopted, ...others] = (await kubectlJson<{ items: Pod[] }>(['get', 'pods', '-n', berth.namespace, '-l', `berth.dev/agent=${objectName(agent.id)}`])).items;
    expect(others).toEqual([]);
    expect(before.map((pod) => pod.metadata.name)).toContain(adopted!.metadata.name);
    expect(adopted!.metadata.name).toMatch(/^wsb-/);
    // The secret is in no spec, and no Secret object was made for the pod.
    expect(adopted!.spec.containers[0].envFrom).toBeUndefined();
    expect(JSON.stringify(adopted)).not.toContain(secret);
    expect((await kubectl(['get', 'secret', `${adopted!.metadata.name}-env`, '-n', berth.namespace])).code).not.toBe(0);
    expect((await kubectl(['get', 'secret', `${objectName(agent.id)}-env`, '-n', berth.namespace])).code).not.toBe(0);

    const read = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'python', code: 'import os\nprint(os.environ["WARM_TOKEN"])' });
    expect(read.body, JSON.stringify(read.body)).toMatchObject({ exitCode: 0, stdout: `${secret}\n` });
    const background = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'printf %s "$WARM_TOKEN"', background: true });
    expect(background.status, JSON.stringify(background.body)).toBe(202);
    const ended = await berth.live.post(`/v1/agents/${agent.id}/processes/${background.body.pid}/wait`, { timeout: 10 });
    expect(ended.body, JSON.stringify(ended.body)).toMatchObject({ status: 'exited', exitCode: 0 });
    expect((await berth.live.get(`/v1/agents/${agent.id}/processes/${background.body.pid}/logs`)).body.stdout).toBe(secret);

    // The cold create of the same agent, for the comparison the test prints.
    const coldStarted = performance.now();
    const cold = (await berth.live.post(`/v1/sessions/${session}/agents`, { secrets: ['WARM_TOKEN'], timeout: '30m', compute: 'node' })).body;
    const coldIdle = (await berth.live.get(`/v1/agents/${cold.id}?waitFor=idle&waitSeconds=60`)).body;
    expect(coldIdle.status).toBe('idle');
    const coldMs = performance.now() - coldStarted;
    console.log(`[warm pools on the real node] create -> idle: claimed (python) ${claimMs.toFixed(0)} ms, cold (node, no pool) ${coldMs.toFixed(0)} ms`);

    await readyPool(1);
    const refilled = await warmPods();
    expect(refilled).toHaveLength(2);
    expect(refilled.map((pod) => pod.metadata.name)).not.toContain(adopted!.metadata.name);

    const containerId = adopted!.status.containerStatuses[0].containerID.replace('containerd://', '');
    const deleted = await kubectl(['delete', 'session', objectName(session), '-n', berth.namespace, '--wait=false']);
    expect(deleted.code, deleted.stderr).toBe(0);
    await eventually(async () => ((await kubectl(['get', 'pod', adopted!.metadata.name, '-n', berth.namespace])).code !== 0 ? true : undefined), {
      what: 'the adopted pod to be deleted with the session',
      timeoutMs: 90_000,
    });
    await eventually(async () => {
      const listed = (JSON.parse(await runsc(['list', '--format=json'])) as { id: string }[] | null) ?? [];
      return listed.every((container) => container.id !== containerId) ? true : undefined;
    }, { timeoutMs: 60_000, what: 'its gVisor sandbox to be gone' });
  });

  it("pauses an adopted pod natively and resumes it into the agent's own pod with its processes, its programs still getting the secret", async () => {
    await readyPool();
    const session = (await berth.live.post('/v1/sessions', { userId: 'warm-native-user' })).body.id as string;
    const agent = (await berth.live.post(`/v1/sessions/${session}/agents`, { secrets: ['WARM_TOKEN'], timeout: '30m' })).body;
    const idle = (await berth.live.get(`/v1/agents/${agent.id}?waitFor=idle&waitSeconds=60`)).body;
    expect(idle.conditions[0].message).toMatch(/claimed from warm pool/);
    // A bash script stays open for as long as it runs (bash reads it as it goes) in /tmp, where the
    // launcher writes exec'd programs: the restore must find it there.
    const counter = await berth.live.post(`/v1/agents/${agent.id}/exec`, {
      language: 'bash',
      code: 'echo started >/dev/shm/mark\nwhile sleep 0.2; do n=$((n + 1)); echo "$n" >/dev/shm/count; done',
      background: true,
    });
    expect(counter.status, JSON.stringify(counter.body)).toBe(202);
    await eventually(async () => ((await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'cat /dev/shm/mark' })).body.stdout === 'started\n' ? true : undefined), {
      what: 'the background process to start',
      timeoutMs: 20_000,
    });

    const paused = await berth.live.post(`/v1/agents/${agent.id}/pause`);
    expect(paused.body.status, JSON.stringify(paused.body)).toBe('paused');
    const [snapshot] = (await berth.live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(snapshot).toMatchObject({ provider: 'kubernetes', level: 'native' });
    const resumed = await berth.live.post(`/v1/agents/${agent.id}/resume`);
    if (resumed.body.status !== 'idle') {
      const described = await kubectl(['describe', 'pod', objectName(agent.id), '-n', berth.namespace]);
      console.log(described.stdout.slice(-4000));
      console.log(berth.operators[0]!.output().split('\n').filter((line) => /restor|stag|native|error|warn/i.test(line)).slice(-30).join('\n'));
      console.log(nodeAgent!.output().split('\n').slice(-30).join('\n'));
    }
    expect(resumed.body.status, JSON.stringify(resumed.body)).toBe('idle');
    // The resumed pod is the agent's own, named after it.
    const pod = await kubectlJson<Pod>(['get', 'pod', objectName(agent.id), '-n', berth.namespace]);
    expect(pod.status.phase).toBe('Running');
    const after = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'cat /dev/shm/mark; printf %s "$WARM_TOKEN"' });
    expect(after.body, JSON.stringify(after.body)).toMatchObject({ exitCode: 0, stdout: `started\n${secret}` });
    const listed = await berth.live.get(`/v1/agents/${agent.id}/processes`);
    expect(listed.body.data.find((process: { pid: number }) => process.pid === counter.body.pid), JSON.stringify(listed.body)).toMatchObject({ status: 'running' });
    // And it still counts, its script read on from the restored /tmp.
    const count = async () => Number((await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'cat /dev/shm/count' })).body.stdout);
    const before = await count();
    await eventually(async () => ((await count()) > before ? true : undefined), { what: 'the restored script to count on', timeoutMs: 10_000 });
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
  });
});
