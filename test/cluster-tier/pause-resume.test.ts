import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { eventually } from '../helpers/http.js';
import { kubectl, startBerthInCluster, waitForAgent, type BerthInCluster } from './helpers.js';

/**
 * Pause and resume of a pod-backed agent: the workspace is archived over the exec API at
 * filesystem level, the pod deleted, and a new pod gets the files back on resume.
 * (Exec on KWOK nodes runs on this host: the pods' /workspace is one shared host directory.)
 */
let berth: BerthInCluster;
let workspace: string;

beforeAll(async () => {
  berth = await startBerthInCluster({ prefix: 'pause' });
  workspace = inject('clusterWorkspace');
});
afterAll(async () => {
  await berth.stop();
});

describe('pause and resume in cluster mode', () => {
  it('archives the workspace, deletes the pod, and restores the files into a new pod', async () => {
    const session = (await berth.live.post('/v1/sessions', { userId: 'pod-pauser' })).body;
    const agent = (await berth.live.post(`/v1/sessions/${session.id}/agents`, {})).body;
    await waitForAgent(berth.live, agent.id, 'idle');
    const pod = agent.id.replace('_', '-');
    const podUid = JSON.parse((await kubectl(['get', 'pod', pod, '-n', berth.namespace, '-o', 'json'])).stdout).metadata.uid;
    const wrote = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'mkdir -p notes && echo kept > notes/pause.txt' });
    expect(wrote.body.exitCode).toBe(0);

    const paused = await berth.live.post(`/v1/agents/${agent.id}/pause`);
    expect(paused.body.status).toBe('paused');
    const [snapshot] = (await berth.live.get(`/v1/snapshots?agentId=${agent.id}`)).body.data;
    expect(snapshot).toMatchObject({ provider: 'kubernetes', type: 'pause', state: 'ready', level: 'filesystem' });
    expect(snapshot.sizeBytes).toBeGreaterThan(0);
    await eventually(async () => ((await kubectl(['get', 'pod', pod, '-n', berth.namespace])).code !== 0 ? true : undefined), {
      what: 'the pod to be deleted',
    });

    // The "pod's" files go away with it; only the archive still has them.
    rmSync(join(workspace, 'notes'), { recursive: true, force: true });
    const resumed = await berth.live.post(`/v1/agents/${agent.id}/resume`);
    expect(resumed.body.status).toBe('idle');
    const newPod = JSON.parse((await kubectl(['get', 'pod', pod, '-n', berth.namespace, '-o', 'json'])).stdout);
    expect(newPod.metadata.uid).not.toBe(podUid);
    expect(newPod.metadata.annotations['berth.dev/restored-from']).toBe(snapshot.id);
    expect(readFileSync(join(workspace, 'notes', 'pause.txt'), 'utf8')).toBe('kept\n');
    expect(existsSync(join(workspace, '.berth-restore'))).toBe(false);
    const read = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'cat notes/pause.txt' });
    expect(read.body.stdout).toBe('kept\n');
  });
});
