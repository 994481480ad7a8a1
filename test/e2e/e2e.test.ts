import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/http.js';

/**
 * Berth installed by its chart on a real cluster with real containers (kind): the REST API,
 * a sandbox pod built from the python image, exec into it, terminate.
 */
const url = process.env.BERTH_E2E_URL!;
const key = process.env.BERTH_E2E_KEY!;
const namespace = process.env.BERTH_E2E_NAMESPACE!;
const api = apiClient(url, key);

describe('Berth on kind', () => {
  it('runs an agent in a pod, execs python, TypeScript and bash in it, and terminates it', async () => {
    const session = (await api.post('/v1/sessions/by-user/e2e', {})).body;
    const agent = (await api.post(`/v1/sessions/${session.id}/agents`, { timeout: '10m' })).body;
    expect(agent.status).toBe('booting');
    await eventually(async () => ((await api.get(`/v1/agents/${agent.id}`)).body.status === 'idle' ? true : undefined), {
      timeoutMs: 240_000,
      intervalMs: 1_000,
      what: 'the agent to be idle',
    });
    const pod = JSON.parse(execFileSync('kubectl', ['get', 'pod', agent.id.replace('_', '-'), '-n', namespace, '-o', 'json'], { encoding: 'utf8' }));
    expect(pod.spec.containers[0].image).toMatch(/^berth\/sandbox-python:/);
    expect(pod.spec.securityContext.runAsUser).toBe(1000);
    for (const [language, code, expected] of [
      ['python', 'import sys; print(sys.version_info[0])', '3\n'],
      ['typescript', 'const n: number = 41; console.log(n + 1)', '42\n'],
      ['bash', 'id -u', '1000\n'],
    ] as const) {
      const result = await api.post(`/v1/agents/${agent.id}/exec`, { language, code });
      expect(result.body, `${language}: ${JSON.stringify(result.body)}`).toMatchObject({ stdout: expected, exitCode: 0 });
    }
    expect((await api.post(`/v1/agents/${agent.id}/terminate`)).body).toEqual({ ok: true });
  });
});
