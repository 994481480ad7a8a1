import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { kubectl, kubectlJson, startBerthInCluster, startClusterProcess, waitForAgent, type BerthInCluster } from '../cluster-tier/helpers.js';

/**
 * Agents on the real node: Berth's operator turns them into real pods under gVisor, and exec
 * through the API server runs in those pods. Skipped, with the reason printed by the setup,
 * only where realNodeSupport() (test/node/node.ts) says this machine cannot run the node.
 */
const unavailable = inject('realNodeUnavailable');
const podName = (agentId: string) => agentId.replace('_', '-');

function runsc(args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile('/usr/local/bin/runsc', [`--root=${inject('runscRoot')}`, ...args], (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout))),
  );
}

describe.skipIf(unavailable !== '')('agents on a real node', () => {
  let berth: BerthInCluster;
  let sessionId: string;

  beforeAll(async () => {
    berth = await startBerthInCluster({ prefix: 'node' });
    sessionId = (await berth.live.post('/v1/sessions', { userId: 'node-user' })).body.id;
  });
  afterAll(async () => {
    await berth?.stop();
  });

  it('runs an agent as a gVisor pod and execs python, TypeScript and bash in it through the API server', async () => {
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, { timeout: '30m' })).body;
    await waitForAgent(berth.live, agent.id, 'idle', 120_000);
    const pod = await kubectlJson(['get', 'pod', podName(agent.id), '-n', berth.namespace]);
    expect(pod.spec.runtimeClassName).toBe('gvisor');
    expect(pod.spec.nodeName).toBe('berth-node');
    expect(pod.status.phase).toBe('Running');
    // runsc knows the pod's containers: the pause container and the sandbox.
    const containerId = pod.status.containerStatuses[0].containerID.replace('containerd://', '');
    const listed = JSON.parse(await runsc(['list', '--format=json'])) as { id: string; status: string }[];
    expect(listed.find((container) => container.id === containerId)?.status).toBe('running');

    const python = await berth.live.post(`/v1/agents/${agent.id}/exec`, {
      language: 'python',
      code: 'import os, platform\nprint(os.getuid(), os.getcwd())\nprint(open("/proc/version").read().strip())',
    });
    expect(python.status, JSON.stringify(python.body)).toBe(200);
    expect(python.body.exitCode).toBe(0);
    const [ids, kernel] = python.body.stdout.trim().split('\n');
    expect(ids).toBe('1000 /workspace');
    // gVisor's own kernel answers, not the host's.
    expect(kernel).not.toBe(readFileSync('/proc/version', 'utf8').trim());
    const dmesg = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'dmesg | head -n 1; echo "$HOME"; exit 3' });
    expect(dmesg.body).toMatchObject({ exitCode: 3, stdout: expect.stringMatching(/Starting gVisor\.\.\.\n\/home\/sandbox\n$/) });
    const typescript = await berth.live.post(`/v1/agents/${agent.id}/exec`, {
      language: 'typescript',
      code: 'const add = (a: number, b: number): number => a + b;\nconsole.log(add(40, 2));',
    });
    expect(typescript.body).toMatchObject({ exitCode: 0, stdout: '42\n' });
    const stderr = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'python', code: 'import sys\nsys.stderr.write("to stderr\\n")\nsys.exit(2)' });
    expect(stderr.body).toMatchObject({ exitCode: 2, stdout: '', stderr: 'to stderr\n' });

    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
    await eventually(async () => ((await kubectl(['get', 'pod', podName(agent.id), '-n', berth.namespace])).code !== 0 ? true : undefined), {
      what: 'the pod to be deleted',
      timeoutMs: 60_000,
    });
    await eventually(async () => {
      const after = JSON.parse(await runsc(['list', '--format=json'])) as { id: string }[] | null;
      return (after ?? []).every((container) => container.id !== containerId) ? true : undefined;
    }, { what: 'the gVisor sandbox to be gone', timeoutMs: 60_000 });
  });

  it("gives the pod the agent's secrets through envFrom", async () => {
    const value = `node-${Date.now()}-secret`;
    expect((await berth.live.post('/v1/secrets', { NODE_TOKEN: value })).body).toEqual({ ok: true, count: 1 });
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, { secrets: ['NODE_TOKEN'] })).body;
    await waitForAgent(berth.live, agent.id, 'idle', 120_000);
    const pod = await kubectlJson(['get', 'pod', podName(agent.id), '-n', berth.namespace]);
    expect(pod.spec.containers[0].envFrom).toEqual([{ secretRef: { name: `${podName(agent.id)}-env` } }]);
    expect(JSON.stringify(pod)).not.toContain(value);
    const read = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'printf %s "$NODE_TOKEN"' });
    expect(read.body).toMatchObject({ exitCode: 0, stdout: value });
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('pauses at filesystem level and resumes into a new gVisor pod with the files', async () => {
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    await waitForAgent(berth.live, agent.id, 'idle', 120_000);
    const name = podName(agent.id);
    const firstUid = (await kubectlJson(['get', 'pod', name, '-n', berth.namespace])).metadata.uid;
    const wrote = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'mkdir -p notes && echo kept > notes/pause.txt' });
    expect(wrote.body.exitCode).toBe(0);

    const paused = await berth.live.post(`/v1/agents/${agent.id}/pause`);
    expect(paused.body.status).toBe('paused');
    const [snapshot] = (await berth.live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(snapshot).toMatchObject({ provider: 'kubernetes', type: 'pause', state: 'ready', level: 'filesystem' });
    await eventually(async () => ((await kubectl(['get', 'pod', name, '-n', berth.namespace])).code !== 0 ? true : undefined), {
      what: 'the pod to be deleted',
      timeoutMs: 60_000,
    });

    const resumed = await berth.live.post(`/v1/agents/${agent.id}/resume`);
    expect(resumed.body.status, berth.operators[0]!.output().split('\n').filter((line) => /resum|restor|error/i.test(line)).slice(-8).join('\n')).toBe('idle');
    const newPod = await kubectlJson(['get', 'pod', name, '-n', berth.namespace]);
    expect(newPod.metadata.uid).not.toBe(firstUid);
    expect(newPod.spec.runtimeClassName).toBe('gvisor');
    // A real pod starts with an empty emptyDir: the file can only have come from the archive.
    const read = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'cat notes/pause.txt; ls -A' });
    expect(read.body).toMatchObject({ exitCode: 0, stdout: 'kept\nnotes\n' });
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('deletes the pods and their gVisor sandboxes when the session is deleted', async () => {
    const cascade = (await berth.live.post('/v1/sessions', { userId: 'node-cascade' })).body.id as string;
    const agents = [(await berth.live.post(`/v1/sessions/${cascade}/agents`, {})).body, (await berth.live.post(`/v1/sessions/${cascade}/agents`, {})).body];
    const containers: string[] = [];
    for (const agent of agents) {
      await waitForAgent(berth.live, agent.id, 'idle', 120_000);
      const pod = await kubectlJson(['get', 'pod', podName(agent.id), '-n', berth.namespace]);
      containers.push(pod.status.containerStatuses[0].containerID.replace('containerd://', ''));
    }
    const deleted = await kubectl(['delete', 'session', podName(cascade), '-n', berth.namespace, '--wait=false']);
    expect(deleted.code, deleted.stderr).toBe(0);
    await eventually(async () => {
      const remaining = await kubectlJson(['get', 'agents,pods', '-n', berth.namespace, '-l', `berth.dev/session=${podName(cascade)}`]);
      return remaining.items.length === 0 ? true : undefined;
    }, { timeoutMs: 90_000, what: 'the agents and pods of the session to be gone' });
    await eventually(async () => {
      const listed = (JSON.parse(await runsc(['list', '--format=json'])) as { id: string }[] | null) ?? [];
      return listed.every((container) => !containers.includes(container.id)) ? true : undefined;
    }, { timeoutMs: 60_000, what: 'their gVisor sandboxes to be gone' });
  });

  it('converges after the operator is killed: agents created meanwhile become gVisor pods', async () => {
    const [operator] = berth.operators;
    expect(await operator!.stop('SIGKILL')).toBe(null);
    const late = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    const replacement = await startClusterProcess('operator', { ...berth.env, POD_NAME: 'operator-replacement' });
    berth.operators.push(replacement);
    await waitForAgent(berth.live, late.id, 'idle', 120_000);
    const pod = await kubectlJson(['get', 'pod', podName(late.id), '-n', berth.namespace]);
    expect(pod.spec.runtimeClassName).toBe('gvisor');
    const exec = await berth.live.post(`/v1/agents/${late.id}/exec`, { language: 'python', code: 'print(6 * 7)' });
    expect(exec.body).toMatchObject({ exitCode: 0, stdout: '42\n' });
    await berth.live.post(`/v1/agents/${late.id}/terminate`);
  });
});
