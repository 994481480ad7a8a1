import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually } from '../helpers/http.js';
import { openSse, runEvents } from '../helpers/sse.js';
import { startBerthInCluster, waitForAgent, type BerthInCluster } from './helpers.js';

/** The agent loop in cluster mode: the operator's runners drive a pod through pods/exec. */
let model: FakeModelServer;
let berth: BerthInCluster;

const script = (body: any): FakeTurn =>
  body.messages.some((message: any) => message.role === 'tool')
    ? { text: 'The pod says hello.', usage: { input: 50, output: 6 } }
    : { text: 'Asking the pod.', toolCalls: [{ name: 'exec', input: { language: 'bash', code: 'echo hello from the pod' } }] };

beforeAll(async () => {
  model = await startFakeOpenAI(script);
  berth = await startBerthInCluster({
    prefix: 'run',
    env: { BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }) },
  });
});
afterAll(async () => {
  await berth.stop();
  await model.close();
});

describe('run in cluster mode', () => {
  it('runs the loop with a tool call through the Kubernetes exec API and streams it', async () => {
    const session = (await berth.live.post('/v1/sessions', { userId: 'cluster-run' })).body;
    const agent = (await berth.live.post(`/v1/sessions/${session.id}/agents`, { tools: ['exec'] })).body;
    await waitForAgent(berth.live, agent.id, 'idle');
    const stream = await openSse(`${berth.apiserver.url}/v1/agents/${agent.id}/stream`, berth.liveKey);
    const run = await berth.live.post(`/v1/agents/${agent.id}/run`, { task: 'say hello' });
    expect(run.status).toBe(202);
    const task = await eventually(
      async () => {
        const current = (await berth.live.get(`/v1/tasks/${run.body.taskId}`)).body;
        return current.status === 'completed' ? current : undefined;
      },
      { timeoutMs: 60_000, what: 'the run to complete' },
    );
    expect(task.output).toBe('The pod says hello.');
    await stream.waitFor((events) => events.some((event) => event.event === 'output'));
    stream.close();
    expect(runEvents(stream.events).map((event) => event.event).filter((kind) => kind !== 'thinking')).toEqual(['tool_call', 'tool_result', 'output']);
    const toolMessage = (model.requests[1] as any).messages.find((message: any) => message.role === 'tool');
    expect(toolMessage.content).toContain('hello from the pod');
  });
});
