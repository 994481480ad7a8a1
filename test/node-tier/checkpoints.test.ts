import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { NodeAgentClient, readArchiveManifest } from '../../providers/src/kubernetes/node-agent.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { kubectl, kubectlJson, startBerthInCluster, startClusterProcess, waitForAgent, type BerthInCluster, type ClusterProcess } from '../cluster-tier/helpers.js';
import { NODE_IP } from '../node/node.js';
import { nodeAgentSettings } from '../node/node-agent-settings.js';

/**
 * Memory checkpoints on the real node (ADR 38): the node agent (`berth node`, here a host process
 * on the node's IP, as the DaemonSet runs on the host network) checkpoints an agent's pod with
 * runsc and stages the archive for the new pod, which the shim's runsc wrapper restores instead
 * of starting. A process holding state only in memory carries on after pause and resume.
 */
const unavailable = inject('realNodeUnavailable');
const podName = (agentId: string) => agentId.replace('_', '-');

/** The counter pod's program: a token drawn in memory and a counter, written out every 50 ms. */
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

describe.skipIf(unavailable !== '')('memory checkpoints on a real node', () => {
  let berth: BerthInCluster;
  let nodeAgent: ClusterProcess | undefined;
  let sessionId: string;
  let nodeAgentEnv: Record<string, string>;

  beforeAll(async () => {
    const settings = await nodeAgentSettings(inject('runscRoot'));
    nodeAgentEnv = settings.env;
    nodeAgent = await startClusterProcess('node', nodeAgentEnv);
    berth = await startBerthInCluster({ prefix: 'nodeckpt', env: { BERTH_NODE_AGENT_PORT: String(settings.port), BERTH_NODE_AGENT_TOKEN: settings.token } });
    sessionId = (await berth.live.post('/v1/sessions', { userId: 'checkpoint-user' })).body.id;
  });
  afterAll(async () => {
    await berth?.stop();
    await nodeAgent?.stop();
  });

  /** State only a native checkpoint keeps: files in /dev/shm (the sandbox's memory) and in $HOME (the root filesystem's writable layer, also in memory), and the pod's own processes. */
  async function writeState(agentId: string): Promise<string> {
    const token = randomBytes(8).toString('hex');
    const wrote = await berth.live.post(`/v1/agents/${agentId}/exec`, {
      language: 'bash',
      code: `echo ${token} > /dev/shm/state && echo ${token} > "$HOME/state" && echo ${token} > /workspace/state && echo ok`,
    });
    expect(wrote.body, JSON.stringify(wrote.body)).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
    return token;
  }

  async function readState(agentId: string): Promise<{ shm: string; home: string; workspace: string; init: string }> {
    const read = await berth.live.post(`/v1/agents/${agentId}/exec`, {
      language: 'bash',
      // The start time of the pod's own processes (the image's tini and its sleep) tells the same processes from new ones.
      code: 'for f in /dev/shm/state "$HOME/state" /workspace/state; do cat "$f" 2>/dev/null || echo -; done; ps -o lstart= -p 1,2 | tr -s " " | paste -sd/',
    });
    expect(read.body.exitCode, JSON.stringify(read.body)).toBe(0);
    const [shm, home, workspace, init] = read.body.stdout.trim().split('\n');
    return { shm: shm!, home: home!, workspace: workspace!, init: init! };
  }

  it('checkpoints a pod with the node agent and restores a python counter into a new pod with its memory', async () => {
    // A pod of its own whose main process is the counter: what gVisor restores are the pod's own
    // processes (it kills those that came in through exec, whose callers are gone).
    const namespace = berth.namespace;
    const podYaml = (gated: boolean) => `apiVersion: v1
kind: Pod
metadata: {name: counter, namespace: ${namespace}}
spec:
  runtimeClassName: gvisor
  restartPolicy: Never
  ${gated ? 'schedulingGates: [{name: berth.dev/native-restore}]' : ''}
  securityContext: {runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}
  containers:
  - name: sandbox
    image: berth/sandbox-python:0.1.0
    imagePullPolicy: Never
    command: ["python3", "-c", ${JSON.stringify(COUNTER)}]
    volumeMounts: [{name: workspace, mountPath: /workspace}]
  volumes: [{name: workspace, emptyDir: {}}]
`;
    const apply = await kubectl(['apply', '-f', '-'], podYaml(false));
    expect(apply.code, apply.stderr).toBe(0);
    expect((await kubectl(['wait', '--for=condition=Ready', '--timeout=120s', '-n', namespace, 'pod/counter'])).code).toBe(0);
    const counter = async () => {
      const read = await kubectl(['exec', '-n', namespace, 'counter', '--', 'cat', '/workspace/counter']);
      const [token, n] = read.stdout.split(' ');
      return [token!, Number(n)] as const;
    };
    const [token] = await eventually(async () => ((await counter())[1] > 0 ? counter() : undefined), { what: 'the counter to count', timeoutMs: 10_000 });
    const client = new NodeAgentClient({ port: Number(nodeAgentEnv.BERTH_NODE_AGENT_PORT), token: nodeAgentEnv.BERTH_NODE_AGENT_TOKEN! });
    expect(await client.info(NODE_IP)).toEqual({ node: 'berth-node', runscVersion: expect.stringMatching(/\S/) });
    const uid = (await kubectlJson(['get', 'pod', 'counter', '-n', namespace])).metadata.uid;
    const archive = Buffer.concat(await (await client.checkpoint(NODE_IP, uid)).toArray());
    expect(await readArchiveManifest(Readable.from([archive]))).toMatchObject({ level: 'native', node: 'berth-node', podUid: uid });
    expect((await kubectl(['delete', 'pod', 'counter', '-n', namespace, '--grace-period=0', '--force'])).code).toBe(0);
    await kubectl(['wait', '--for=delete', '--timeout=60s', '-n', namespace, 'pod/counter']);

    expect((await kubectl(['apply', '-f', '-'], podYaml(true))).code).toBe(0);
    const newUid = (await kubectlJson(['get', 'pod', 'counter', '-n', namespace])).metadata.uid;
    await client.stage(NODE_IP, newUid, Readable.from([archive]));
    await expect(client.stage(NODE_IP, newUid, Readable.from([Buffer.from('not an archive')]))).rejects.toMatchObject({ status: 422 });
    await client.stage(NODE_IP, newUid, Readable.from([archive]));
    const released = await kubectl(['patch', 'pod', 'counter', '-n', namespace, '--type=json', '-p', '[{"op":"remove","path":"/spec/schedulingGates"}]']);
    expect(released.code, released.stderr).toBe(0);
    expect((await kubectl(['wait', '--for=condition=Ready', '--timeout=120s', '-n', namespace, 'pod/counter'])).code).toBe(0);
    const [tokenAfter, after] = await counter();
    // The token was drawn in the process's memory before the checkpoint: the same process goes on.
    expect(tokenAfter).toBe(token);
    const later = await eventually(async () => {
      const [, n] = await counter();
      return n > after ? n : undefined;
    }, { what: 'the restored counter to go on counting', timeoutMs: 10_000 });
    expect(later).toBeGreaterThan(after);
    await client.unstage(NODE_IP, newUid);
    await kubectl(['delete', 'pod', 'counter', '-n', namespace, '--grace-period=0', '--force']);
  });

  it('pauses an agent natively and resumes it into a new gVisor pod with its processes and memory', async () => {
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    await waitForAgent(berth.live, agent.id, 'idle', 120_000);
    const name = podName(agent.id);
    const firstUid = (await kubectlJson(['get', 'pod', name, '-n', berth.namespace])).metadata.uid;
    const token = await writeState(agent.id);
    const before = await readState(agent.id);
    expect(before).toMatchObject({ shm: token, home: token, workspace: token });

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
    // The same processes (started before the pause) and what was in the sandbox's memory.
    expect(await readState(agent.id)).toEqual(before);
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('resumes a native snapshot as a new agent at native level', async () => {
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    await waitForAgent(berth.live, agent.id, 'idle', 120_000);
    const token = await writeState(agent.id);
    expect((await berth.live.post(`/v1/agents/${agent.id}/pause`)).body.status).toBe('paused');
    const [snapshot] = (await berth.live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(snapshot.level).toBe('native');
    const fork = await berth.live.post(`/v1/snapshots/${snapshot.id}/resume`, {});
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    expect(fork.body).toMatchObject({ provider: 'kubernetes', resumeLevel: 'native' });
    await waitForAgent(berth.live, fork.body.agentId, 'idle', 120_000);
    const pod = await kubectlJson(['get', 'pod', podName(fork.body.agentId), '-n', berth.namespace]);
    expect(pod.metadata.annotations['berth.dev/restore-level']).toBe('native');
    expect(await readState(fork.body.agentId)).toMatchObject({ shm: token, home: token, workspace: token });
    await berth.live.post(`/v1/agents/${fork.body.agentId}/terminate`);
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('pauses at filesystem level when no node agent answers on the node, and resumes with the files only', async () => {
    await nodeAgent!.stop();
    nodeAgent = undefined;
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    await waitForAgent(berth.live, agent.id, 'idle', 120_000);
    const token = await writeState(agent.id);
    const before = await readState(agent.id);
    const paused = await berth.live.post(`/v1/agents/${agent.id}/pause`);
    expect(paused.body.status).toBe('paused');
    const [snapshot] = (await berth.live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(snapshot).toMatchObject({ provider: 'kubernetes', state: 'ready', level: 'filesystem' });
    const resumed = await berth.live.post(`/v1/agents/${agent.id}/resume`);
    expect(resumed.body.status).toBe('idle');
    const after = await readState(agent.id);
    expect(after).toMatchObject({ shm: '-', home: '-', workspace: token });
    expect(after.init).not.toBe(before.init);
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
    nodeAgent = await startClusterProcess('node', nodeAgentEnv);
  });
});
