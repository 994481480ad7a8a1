/**
 * `make bench` (streamed exec and terminal): how soon output arrives, against a floor measured in
 * the same run on the same sandbox: the synchronous exec of the same program (POST /exec, which
 * answers once it ended).
 *   streamed exec     POST /exec/stream of bash `echo x`: until the first stdout event, and until `exit`
 *   terminal echo     on an open terminal (bash), from sending `echo <n>` to seeing its output
 * and the terminal's open (token, upgrade, bash started) once per run.
 */
import WebSocket from 'ws';
import { startBerth, tempDir } from '../helpers/berth.js';
import type { ApiClient } from '../helpers/http.js';
import { removeDataDir } from '../helpers/runsc.js';
import { percentile } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);

async function idleAgent(api: ApiClient): Promise<string> {
  const session = (await api.post('/v1/sessions', { userId: 'bench-stream' })).body;
  const agent = (await api.post(`/v1/sessions/${session.id}/agents`, { timeout: '1h' })).body;
  for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
    if ((await api.get(`/v1/agents/${agent.id}`)).body.status === 'idle') return agent.id;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`agent ${agent.id} did not become idle`);
}

/** Milliseconds to the first stdout event and to the exit event of one streamed exec. */
async function streamed(baseUrl: string, key: string, agentId: string): Promise<{ first: number; exit: number }> {
  const started = performance.now();
  const response = await fetch(`${baseUrl}/v1/agents/${agentId}/exec/stream`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ language: 'bash', code: 'echo x' }),
  });
  let text = '';
  let first: number | undefined;
  const decoder = new TextDecoder();
  for await (const chunk of response.body!) {
    text += decoder.decode(chunk as Uint8Array, { stream: true });
    if (first === undefined && text.includes('event: stdout')) first = performance.now() - started;
    if (text.includes('event: exit')) return { first: first ?? performance.now() - started, exit: performance.now() - started };
  }
  throw new Error(`the stream ended without exit: ${text}`);
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-stream-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  try {
    const api = berth.api(berth.liveKey);
    const agentId = await idleAgent(api);
    const floor: number[] = [];
    const first: number[] = [];
    const exit: number[] = [];
    for (let i = 0; i < RUNS + 1; i++) {
      const started = performance.now();
      const result = await api.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'echo x' });
      if (result.body.stdout !== 'x\n') throw new Error(`exec answered ${JSON.stringify(result.body)}`);
      const sync = performance.now() - started;
      const stream = await streamed(berth.baseUrl, berth.liveKey!, agentId);
      if (i === 0) continue; // the first of each warms the sandbox
      floor.push(sync);
      first.push(stream.first);
      exit.push(stream.exit);
    }

    const opens: number[] = [];
    const echoes: number[] = [];
    for (let i = 0; i < Math.max(2, Math.ceil(RUNS / 5)); i++) {
      const started = performance.now();
      const { path } = (await api.post(`/v1/agents/${agentId}/pty/token`, {})).body;
      const ws = new WebSocket(`${berth.baseUrl.replace(/^http/, 'ws')}${path}&argv=bash&argv=--norc`);
      let screen = '';
      let waiter: { text: string; resolve: () => void } | undefined;
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        if (!isBinary) return;
        screen += data.toString('utf8');
        if (waiter && screen.includes(waiter.text)) waiter.resolve();
      });
      const seen = (text: string) =>
        new Promise<void>((resolve, reject) => {
          if (screen.includes(text)) return resolve();
          const timer = setTimeout(() => reject(new Error(`no "${text}" on the terminal: ${JSON.stringify(screen)}`)), 30_000);
          waiter = { text, resolve: () => (clearTimeout(timer), resolve()) };
        });
      await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
      ws.send(Buffer.from('echo ready\n'));
      await seen('ready\r\n');
      opens.push(performance.now() - started);
      for (let n = 0; n < RUNS; n++) {
        const sent = performance.now();
        ws.send(Buffer.from(`echo $((${n} + 1000))\n`));
        await seen(`\r${n + 1000}\r\n`);
        echoes.push(performance.now() - sent);
      }
      ws.close();
    }

    const header = `${'measure'.padEnd(34)}${'p50 ms'.padStart(8)}${'p95 ms'.padStart(8)}   ${'floor'.padEnd(22)}${'p50 ms'.padStart(8)}${'p95 ms'.padStart(8)}${'ratio'.padStart(9)}`;
    const line = (what: string, samples: number[]) =>
      `${what.padEnd(34)}${percentile(samples, 50).toFixed(1).padStart(8)}${percentile(samples, 95).toFixed(1).padStart(8)}   ${'sync exec `echo x`'.padEnd(22)}${percentile(floor, 50).toFixed(1).padStart(8)}${percentile(floor, 95).toFixed(1).padStart(8)}${`${(percentile(samples, 50) / percentile(floor, 50)).toFixed(2)}x`.padStart(9)}`;
    console.log(`\nBerth streamed exec and terminal (local provider), ${RUNS} runs each\n`);
    console.log(header);
    console.log(line('streamed exec: first stdout', first));
    console.log(line('streamed exec: exit event', exit));
    console.log(line('terminal: echo round trip', echoes));
    console.log(line('terminal: open (token to prompt)', opens));
    console.log(
      '\nratio = p50 / floor p50, the floor being the synchronous exec of the same program, measured in the same run.\n' +
        'A terminal echo runs a shell builtin in an open bash: it costs no process start, so it is below the floor.',
    );
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

await main();
