import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startClusterProcess, type ClusterProcess } from '../cluster-tier/helpers.js';
import { NODE_IP, RUNSC, RUNSC_RESTORE_WRAPPER } from '../node/node.js';

/**
 * The node agent's own API (`berth node`, ADR 38) on the real node, over HTTP: its token, what it
 * refuses to stage and why, what staging leaves on disk for the runsc wrapper, and its metrics.
 * checkpoints.test.ts drives it through pods; this file checks its edges.
 */
const unavailable = inject('realNodeUnavailable');

describe.skipIf(unavailable !== '')('the node agent', () => {
  let agent: ClusterProcess;
  let base: string;
  let token: string;
  let stateDir: string;
  let runscVersion: string;

  beforeAll(async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, NODE_IP, resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise((resolve) => probe.close(resolve));
    token = randomBytes(24).toString('hex');
    stateDir = mkdtempSync(join(tmpdir(), 'berth-node-agent-'));
    agent = await startClusterProcess('node', {
      BERTH_HOST: NODE_IP,
      BERTH_NODE_AGENT_PORT: String(port),
      BERTH_NODE_AGENT_TOKEN: token,
      BERTH_NODE_NAME: 'berth-node',
      BERTH_NODE_RUNSC_ROOT: inject('runscRoot'),
      BERTH_NODE_STATE_DIR: stateDir,
      BERTH_RUNSC: RUNSC,
    });
    base = agent.url;
    runscVersion = execFileSync(RUNSC, ['--version']).toString().split('\n')[0]!.replace('runsc version ', '').trim();
  });
  afterAll(async () => {
    await agent?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  /** `bearer`: the token to present; null for none. */
  const call = (path: string, init: RequestInit = {}, bearer: string | null = token) =>
    fetch(`${base}${path}`, { ...init, headers: { ...(init.headers as Record<string, string>), ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) } });

  /** A gzipped tar of `manifest` (when given) and a checkpoint/ directory, as the agent makes them. */
  function archive(manifest: object | undefined): Buffer {
    const dir = mkdtempSync(join(tmpdir(), 'berth-archive-'));
    mkdirSync(join(dir, 'checkpoint'));
    writeFileSync(join(dir, 'checkpoint', 'checkpoint.img'), 'not a real image');
    mkdirSync(join(dir, 'workspace'));
    writeFileSync(join(dir, 'workspace', 'notes.txt'), 'kept');
    const names = manifest ? ['manifest.json', 'checkpoint', 'workspace'] : ['checkpoint', 'workspace'];
    if (manifest) writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest));
    const tar = execFileSync('tar', ['-czf', '-', '-C', dir, ...names]);
    rmSync(dir, { recursive: true, force: true });
    return tar;
  }
  const manifest = (version: string) => ({ format: 1, provider: 'kubernetes', level: 'native', node: 'berth-node', runscVersion: version, podUid: randomUUID(), createdAt: new Date().toISOString() });

  it('installs the runsc wrapper in its state directory and answers health without a token', async () => {
    const installed = join(stateDir, 'bin', 'runsc');
    expect(readFileSync(installed, 'utf8')).toBe(readFileSync(RUNSC_RESTORE_WRAPPER, 'utf8'));
    expect(statSync(installed).mode & 0o777).toBe(0o755);
    expect((await call('/healthz', {}, null)).status).toBe(200);
  });

  it('refuses every /v1 call without the token, or with another one, in the error envelope', async () => {
    for (const bearer of [null, 'x'.repeat(48), `${token}x`]) {
      const response = await call('/v1/node', {}, bearer);
      expect(response.status).toBe(401);
      expect(((await response.json()) as { error: unknown }).error).toMatchObject({ code: 'unauthorized', requestId: expect.any(String) });
    }
    expect(await (await call('/v1/node')).json()).toEqual({ node: 'berth-node', runscVersion });
  });

  it('refuses what is not a pod UID, and a pod with no running sandbox on this node, stopping nothing', async () => {
    const bad = await call('/v1/pods/..%2F..%2Fetc/checkpoint', { method: 'POST' });
    expect(bad.status).toBe(422);
    const missing = await call(`/v1/pods/${randomUUID()}/checkpoint`, { method: 'POST' });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });

  it('stages a native archive of its runsc for one pod UID, and removes it on request', async () => {
    const uid = randomUUID();
    const staged = await call(`/v1/restores/${uid}`, { method: 'PUT', body: archive(manifest(runscVersion)) });
    expect(staged.status, await staged.clone().text()).toBe(201);
    expect(await staged.json()).toEqual({ staged: true, node: 'berth-node', runscVersion });
    const dir = join(stateDir, 'restores', uid);
    // What the wrapper reads: the image, the workspace to put back, and the marker written last.
    expect(readFileSync(join(dir, 'image', 'checkpoint.img'), 'utf8')).toBe('not a real image');
    expect(readFileSync(join(dir, 'workspace', 'notes.txt'), 'utf8')).toBe('kept');
    expect(existsSync(join(dir, 'ready'))).toBe(true);
    expect((await call(`/v1/restores/${uid}`, { method: 'DELETE' })).status).toBe(204);
    expect(existsSync(dir)).toBe(false);
  });

  it('refuses an archive of another runsc (409), one without a native manifest and one that is no archive (422), leaving nothing', async () => {
    const uid = randomUUID();
    const other = await call(`/v1/restores/${uid}`, { method: 'PUT', body: archive(manifest('release-19990101.0')) });
    expect(other.status).toBe(409);
    expect(((await other.json()) as { error: unknown }).error).toMatchObject({ code: 'conflict', message: expect.stringContaining('release-19990101.0') });
    expect((await call(`/v1/restores/${uid}`, { method: 'PUT', body: archive(undefined) })).status).toBe(422);
    expect((await call(`/v1/restores/${uid}`, { method: 'PUT', body: Buffer.from('not an archive at all') })).status).toBe(422);
    expect(existsSync(join(stateDir, 'restores', uid))).toBe(false);
    expect(existsSync(join(stateDir, 'restores', `${uid}.partial`))).toBe(false);
    const metrics = await (await call('/metrics', {}, null)).text();
    expect(metrics).toMatch(/berth_node_restores_staged_total\{result="version_mismatch"\} 1/);
    expect(metrics).toMatch(/berth_node_restores_staged_total\{result="error"\} 2/);
    expect(metrics).toMatch(/berth_node_restores_staged_total\{result="success"\} 1/);
  });
});
