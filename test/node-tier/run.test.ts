import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually } from '../helpers/http.js';
import { startBerthInCluster, waitForAgent, type BerthInCluster } from '../cluster-tier/helpers.js';

/**
 * The agent loop's tools in a real gVisor pod: the operator's runner drives the model (the local
 * fake OpenAI server, the only thing mocked: it is the network boundary) and runs its tool calls
 * in the agent's pod through the Kubernetes exec API, which the kubelet hands to runsc.
 */
const unavailable = inject('realNodeUnavailable');

/** One tool call a turn, in this order; then the answer. Each turn sees the tool results so far. */
const CALLS = [
  { name: 'write_file', input: { path: 'notes/plan.txt', content: 'step one\nstep two\n' } },
  { name: 'exec', input: { language: 'python', code: 'import platform\nprint(open("notes/plan.txt").read().count("step"), open("/proc/version").read().split()[0:3])' } },
  { name: 'list_files', input: { path: 'notes' } },
  { name: 'read_file', input: { path: '/workspace/notes/plan.txt' } },
  { name: 'exec', input: { language: 'bash', code: 'echo "$(id -u) $(pwd)" > notes/who.txt; cat notes/who.txt' } },
];

describe.skipIf(unavailable !== '')('the agent loop on a real node', () => {
  let model: FakeModelServer;
  let berth: BerthInCluster;

  beforeAll(async () => {
    model = await startFakeOpenAI((body: any): FakeTurn => {
      const done = body.messages.filter((message: any) => message.role === 'tool').length;
      const call = CALLS[done];
      return call ? { text: `step ${done + 1}`, toolCalls: [call], usage: { input: 40, output: 8 } } : { text: 'All done in the pod.', usage: { input: 60, output: 5 } };
    });
    berth = await startBerthInCluster({
      prefix: 'noderun',
      env: { BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }) },
    });
  });
  afterAll(async () => {
    await berth?.stop();
    await model?.close();
  });

  it("runs the exec and file tools in the agent's gVisor pod", async () => {
    const session = (await berth.live.post('/v1/sessions', { userId: 'node-run' })).body;
    const agent = (await berth.live.post(`/v1/sessions/${session.id}/agents`, { tools: ['exec', 'read_file', 'write_file', 'list_files'] })).body;
    await waitForAgent(berth.live, agent.id, 'idle', 120_000);
    const run = await berth.live.post(`/v1/agents/${agent.id}/run`, { task: 'plan in a file, then check it' });
    expect(run.status, JSON.stringify(run.body)).toBe(202);
    const task = await eventually(
      async () => {
        const current = (await berth.live.get(`/v1/tasks/${run.body.taskId}`)).body;
        return ['completed', 'failed'].includes(current.status) ? current : undefined;
      },
      { timeoutMs: 120_000, what: 'the run to end' },
    );
    expect(task, JSON.stringify(task)).toMatchObject({ status: 'completed', output: 'All done in the pod.' });

    // What each tool answered, as the model saw it on its last turn.
    const results = (model.requests.at(-1) as any).messages.filter((message: any) => message.role === 'tool').map((message: any) => String(message.content));
    expect(results).toHaveLength(CALLS.length);
    expect(results[0]).toContain('wrote 18 bytes to /workspace/notes/plan.txt');
    // gVisor's kernel answers /proc/version, not the host's.
    const hostKernel = readFileSync('/proc/version', 'utf8').split(' ').slice(0, 3);
    expect(results[1]).toContain("2 ['Linux', 'version',");
    expect(results[1]).not.toContain(hostKernel[2]!);
    expect(results[2]).toContain('plan.txt');
    expect(results[3]).toContain('step one\nstep two');
    expect(results[4]).toContain('1000 /workspace');

    // The files are in the pod, where a later exec finds them.
    const read = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'cat notes/who.txt; dmesg | head -n 1' });
    expect(read.body).toMatchObject({ exitCode: 0, stdout: expect.stringMatching(/^1000 \/workspace\n.*gVisor/) });
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
  });
});
