import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { startBerthInCluster, waitForAgent, type BerthInCluster } from '../cluster-tier/helpers.js';

/**
 * Files and ports of a real gVisor pod (ADR 40): the Kubernetes provider's pod-files.sh and
 * pod-relay.sh over the API server's exec, in the pod's own workspace and on its own loopback.
 */
const unavailable = inject('realNodeUnavailable');

describe.skipIf(unavailable !== '')('files and ports of a pod on a real node', () => {
  let berth: BerthInCluster;
  let agentId: string;

  beforeAll(async () => {
    berth = await startBerthInCluster({ prefix: 'nodefiles' });
    const session = (await berth.live.post('/v1/sessions', { userId: 'node-files-user' })).body;
    agentId = (await berth.live.post(`/v1/sessions/${session.id}/agents`, { timeout: '30m' })).body.id;
    await waitForAgent(berth.live, agentId, 'idle', 120_000);
  });
  afterAll(async () => {
    await berth?.stop();
  });

  it('uploads, lists, downloads and refuses a symlink out of /workspace', async () => {
    const body = randomBytes(3 * 1024 * 1024);
    const auth = { authorization: `Bearer ${berth.liveKey}` };
    const put = await fetch(`${berth.apiserver.url}/v1/agents/${agentId}/files?path=in/blob.bin&parents=true`, { method: 'PUT', headers: { ...auth, 'content-type': 'application/octet-stream' }, body });
    expect(put.status, await put.clone().text()).toBe(201);
    const inPod = await berth.live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'sha256sum in/blob.bin | cut -d" " -f1; ln -s /etc etc-link' });
    expect(inPod.body.stdout.split('\n')[0]).toBe(createHash('sha256').update(body).digest('hex'));
    const listed = await berth.live.get(`/v1/agents/${agentId}/files/list`);
    expect(listed.body.data.map((entry: any) => [entry.name, entry.type])).toEqual([
      ['etc-link', 'symlink'],
      ['in', 'directory'],
    ]);
    const get = await fetch(`${berth.apiserver.url}/v1/agents/${agentId}/files?path=/workspace/in/blob.bin`, { headers: auth });
    expect(Buffer.from(await get.arrayBuffer()).equals(body)).toBe(true);
    expect((await berth.live.get(`/v1/agents/${agentId}/files?path=etc-link/passwd`)).status).toBe(422);
  });

  it('reaches a server on the pod loopback through the proxy', async () => {
    await berth.live.post(`/v1/agents/${agentId}/files/mkdir`, { path: 'site' });
    await fetch(`${berth.apiserver.url}/v1/agents/${agentId}/files?path=site/index.html`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${berth.liveKey}`, 'content-type': 'application/octet-stream' },
      body: '<h1>from the pod</h1>',
    });
    // Background processes are not on Kubernetes yet: the server is started detached by a plain
    // exec, which the pod's exec holds open while the server runs (seen here: until the exec's
    // limit), so it is given a short one and its 504 is expected.
    const started = await berth.live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'cd site && setsid nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 1', timeout: 2 });
    expect([200, 504]).toContain(started.status);
    expect((await berth.live.post(`/v1/agents/${agentId}/ports`, { port: 8000 })).status).toBe(201);
    const page = await eventually(async () => {
      const response = await berth.live.raw(`/v1/agents/${agentId}/ports/8000/proxy/index.html`, { method: 'GET' });
      return response.status === 200 ? response : undefined;
    }, { timeoutMs: 30_000 });
    expect(page.body).toBe('<h1>from the pod</h1>');
  });
});
