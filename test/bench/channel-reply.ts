/**
 * `make bench` (channels): how long a visitor waits for a reply, beside a floor measured in the
 * same run against the same `berth up`:
 *
 *   message → reply   POST /channels/:id/messages: the message and its job stored, the job run
 *                     (session, agent, run, agent ended), the reply stored and announced
 *   floor             a trigger fire → its job completed (GET /v1/jobs/:id every 10 ms): the
 *                     same job path without the conversation around it
 *
 * On the test key: jobs run on the mock provider and model, so the numbers are Berth's own path,
 * not a sandbox's start or a model's answer.
 */
import { createHmac } from 'node:crypto';
import { startBerth, tempDir } from '../helpers/berth.js';
import { removeDataDir } from '../helpers/runsc.js';
import { printFloorTable, runBench } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-channels-');
  // The visitor limit of a minute would refuse a benchmark's burst from one visitor.
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn', BERTH_CHANNEL_LIMITS: JSON.stringify({ visitorMessages: 10_000, ipMessages: 10_000 }) } });
  const api = berth.api(berth.testKey);
  const anonymous = berth.api(undefined);
  try {
    await api.post('/v1/agent-definitions', { name: 'bench-bot' });
    const channel = (await api.post('/v1/channels', { type: 'chat_embed', agent: 'bench-bot' })).body;
    const trigger = (await api.post('/v1/triggers', { agent: 'bench-bot', userId: 'bench', type: 'webhook' })).body;
    const firePath = new URL(trigger.url).pathname;

    const message = async (n: number) => {
      const started = performance.now();
      const response = await anonymous.post(`/channels/${channel.id}/messages`, { text: `question ${n}`, visitorId: 'bench-visitor' });
      if (response.status !== 200) throw new Error(`message: ${response.status} ${JSON.stringify(response.body)}`);
      return performance.now() - started;
    };
    const job = async (n: number) => {
      const body = JSON.stringify({ n });
      const started = performance.now();
      const fired = await anonymous.raw(firePath, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-trigger-signature': createHmac('sha256', trigger.secret).update(body).digest('hex') },
        body,
      });
      if (fired.status !== 202) throw new Error(`fire: ${fired.status}`);
      for (;;) {
        const state = (await api.get(`/v1/jobs/${fired.body.jobId}`)).body.state;
        if (state === 'completed') return performance.now() - started;
        if (state === 'failed' || state === 'cancelled') throw new Error(`job ${state}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };

    // Warm both paths, then alternate them so that the machine's noise falls on both alike.
    await message(-1);
    await job(-1);
    const replies: number[] = [];
    const jobs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      replies.push(await message(i));
      jobs.push(await job(i));
    }

    printFloorTable(`channel replies, ${RUNS} runs (floor measured in the same run)`, [{ name: 'message → reply', samples: replies, floorName: 'fire → job completed', floor: jobs }]);
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

runBench(main);
