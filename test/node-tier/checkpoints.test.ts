import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { kubectl, kubectlJson, startBerthInCluster, startClusterProcess, waitForAgent, type BerthInCluster, type ClusterProcess } from '../cluster-tier/helpers.js';
import { NODE_IP, RESTORES, RUNSC } from '../node/node.js';

/**
 * Memory checkpoints on the real node (ADR 38): the node agent (`berth node`, here a host process
 * on the node's IP, as the DaemonSet runs on the host network) checkpoints an agent's pod with
 * runsc and stages the archive for the new pod, which the shim's runsc wrapper restores instead
 * of starting. A process holding state only in memory carries on after pause and resume.
 */
const unavailable = inject('realNodeUnavailable');
const podName = (agentId: string) => agentId.replace('_', '-');

/** A program of its own: a secret drawn in memory and a counter, written out every 50 ms. */
const COUNTER = [
  'import os, time',
  'token = os.urandom(8).hex()',
  'n = 0',
  'while True:',
  '    n += 1',
  '    with open("/workspace/counter.tmp", "w") as f: f.write(f"{token} {n}")',
  '    os.replace("/workspace/counter.tmp", "/workspace/counter")',
  '    time.sleep(0.05)',
].join('\n');

async function freePort(host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe.skipIf(unavailable !== '')('memory checkpoints on a real node', () => {
  let berth: BerthInCluster;
  let nodeAgent: ClusterProcess | undefined;
  let sessionId: string;
  let nodeAgentEnv: Record<string, string>;

  beforeAll(async () => {
    const port = await freePort(NODE_IP);
    const token = randomBytes(24).toString('hex');
    nodeAgentEnv = {
      BERTH_HOST: NODE_IP,
      BERTH_NODE_AGENT_PORT: String(port),
      BERTH_NODE_AGENT_TOKEN: token,
      BERTH_NODE_NAME: 'berth-node',
      BERTH_NODE_RUNSC_ROOT: inject('runscRoot'),
      // Its restores/ is where the test node's runsc wrapper looks (test/node/node.ts).
      BERTH_NODE_STATE_DIR: `${RESTORES}/..`,
      BERTH_RUNSC: RUNSC,
    };
    nodeAgent = await startClusterProcess('node', nodeAgentEnv);
    berth = await startBerthInCluster({ prefix: 'nodeckpt', env: { BERTH_NODE_AGENT_PORT: String(port), BERTH_NODE_AGENT_TOKEN: token } });
    sessionId = (await berth.live.post('/v1/sessions', { userId: 'checkpoint-user' })).body.id;
  });
  afterAll(async () => {
    await berth?.stop();
    await nodeAgent?.stop();
  });

  async function startCounter(agentId: string): Promise<[token: string, n: number]> {
    const started = await berth.live.post(`/v1/agents/${agentId}/exec`, {
      language: 'bash',
      code: `cat > /workspace/counter.py <<'PY'\n${COUNTER}\nPY\nsetsid nohup python3 /workspace/counter.py >/workspace/counter.err 2>&1 </dev/null &\nsleep 0.5; cat /workspace/counter`,
    });
    expect(started.body.exitCode, JSON.stringify(started.body)).toBe(0);
    return readCounter(agentId);
  }

  async function readCounter(agentId: string): Promise<[token: string, n: number]> {
    const read = await berth.live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'cat /workspace/counter' });
    expect(read.body.exitCode, JSON.stringify(read.body)).toBe(0);
    const [token, n] = read.body.stdout.split(' ');
    return [token, Number(n)];
  }

  it('pauses natively and resumes into a new gVisor pod with the same processes and memory', async () => {
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    await waitForAgent(berth.live, agent.id, 'idle', 120_000);
    const name = podName(agent.id);
    const firstUid = (await kubectlJson(['get', 'pod', name, '-n', berth.namespace])).metadata.uid;
    const [token, before] = await startCounter(agent.id);
    expect(before).toBeGreaterThan(0);

    const paused = await berth.live.post(`/v1/agents/${agent.id}/pause`);
    expect(paused.body.status, JSON.stringify(paused.body)).toBe('paused');
    const [snapshot] = (await berth.live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(snapshot).toMatchObject({ provider: 'kubernetes', type: 'pause', state: 'ready', level: 'native' });
    expect(snapshot.sizeBytes).toBeGreaterThan(0);
    await eventually(async () => ((await kubectl(['get', 'pod', name, '-n', berth.namespace])).code !== 0 ? true : undefined), {
      what: 'the pod to be deleted',
      timeoutMs: 60_000,
    });

    const resumed = await berth.live.post(`/v1/agents/${agent.id}/resume`);
    expect(resumed.body.status, berth.operators[0]!.output().split('\n').filter((line) => /resum|restor|stag|error|warn/i.test(line)).slice(-8).join('\n')).toBe('idle');
    const pod = await kubectlJson(['get', 'pod', name, '-n', berth.namespace]);
    expect(pod.metadata.uid).not.toBe(firstUid);
    expect(pod.metadata.annotations['berth.dev/restore-level']).toBe('native');
    expect(pod.spec.runtimeClassName).toBe('gvisor');

    // The same process: the token it drew in memory before the pause, its counter past the pause's value and still counting.
    const [tokenAfter, after] = await readCounter(agent.id);
    console.log((await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'ps -ef; cat /workspace/counter.err; ls -la /workspace; sleep 1; cat /workspace/counter' })).body);
    expect(tokenAfter).toBe(token);
    expect(after).toBeGreaterThanOrEqual(before);
    const later = await eventually(async () => {
      const [, n] = await readCounter(agent.id);
      return n > after ? n : undefined;
    }, { what: 'the restored counter to go on counting', timeoutMs: 10_000 });
    expect(later).toBeGreaterThan(after);
    const processes = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'ps -eo args | grep -c "^python3 /workspace/counter.py"' });
    expect(processes.body.stdout.trim()).toBe('1');
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('resumes a native snapshot as a new agent at native level', async () => {
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    await waitForAgent(berth.live, agent.id, 'idle', 120_000);
    const [token] = await startCounter(agent.id);
    expect((await berth.live.post(`/v1/agents/${agent.id}/pause`)).body.status).toBe('paused');
    const [snapshot] = (await berth.live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(snapshot.level).toBe('native');
    const fork = await berth.live.post(`/v1/snapshots/${snapshot.id}/resume`, {});
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    expect(fork.body).toMatchObject({ provider: 'kubernetes', resumeLevel: 'native' });
    await waitForAgent(berth.live, fork.body.agentId, 'idle', 120_000);
    const pod = await kubectlJson(['get', 'pod', podName(fork.body.agentId), '-n', berth.namespace]);
    expect(pod.metadata.annotations['berth.dev/restore-level']).toBe('native');
    const [tokenAfter] = await readCounter(fork.body.agentId);
    expect(tokenAfter).toBe(token);
    await berth.live.post(`/v1/agents/${fork.body.agentId}/terminate`);
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('pauses at filesystem level when no node agent answers on the node, and resumes with the files', async () => {
    await nodeAgent!.stop();
    nodeAgent = undefined;
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    await waitForAgent(berth.live, agent.id, 'idle', 120_000);
    const [token] = await startCounter(agent.id);
    const paused = await berth.live.post(`/v1/agents/${agent.id}/pause`);
    expect(paused.body.status).toBe('paused');
    const [snapshot] = (await berth.live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(snapshot).toMatchObject({ provider: 'kubernetes', state: 'ready', level: 'filesystem' });
    const resumed = await berth.live.post(`/v1/agents/${agent.id}/resume`);
    expect(resumed.body.status).toBe('idle');
    // The files came back, the process did not: the counter file stands still at the pause's value.
    const [tokenAfter, n] = await readCounter(agent.id);
    expect(tokenAfter).toBe(token);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await readCounter(agent.id))[1]).toBe(n);
    const processes = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'ps -eo args | grep -c "^python3 /workspace/counter.py" || true' });
    expect(processes.body.stdout.trim()).toBe('0');
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
    nodeAgent = await startClusterProcess('node', nodeAgentEnv);
  });
});
