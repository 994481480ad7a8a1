/**
 * `make bench` (the SDK and the CLI, ADR 43): what they add over the plain HTTP call, against
 * floors measured in the same run on the same sandbox.
 *   SDK exec bash `true`        agent.exec.bash('true')         floor: the same POST /exec with fetch
 *   SDK streamed exec to exit   agent.exec.stream(...) to exit  floor: POST /exec/stream read with fetch to `exit`
 *   CLI agents list --json      `berth agents list --json`      floor: node starting and fetching GET /v1/agents
 *   CLI agents exec             `berth agents exec <id> true`   floor: node starting and fetching POST /exec
 *   SDK create → idle (warm)    agents.create(...) resolved     floor: POST ?waitFor=idle with fetch
 *     (each create claims the sandbox of a warm pool of one, refilled before the next)
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Berth } from '../../sdk/src/index.js';
import { ROOT, startBerth, tempDir } from '../helpers/berth.js';
import { eventually } from '../helpers/http.js';
import { removeDataDir } from '../helpers/runsc.js';
import { printFloorTable, runBench } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const BIN = join(ROOT, 'apiserver', 'bin', 'berth.js');

async function timedAsync(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}

/** A node process to its end; asynchronous, so this process's own connections stay served meanwhile. */
function node(args: string[], env: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${args.join(' ')} exited ${code}: ${stderr}`))));
  });
}

runBench(async () => {
  const dataDir = tempDir('berth-bench-sdk-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  try {
    const key = berth.liveKey!;
    const sdk = new Berth({ url: berth.baseUrl, apiKey: key });
    const session = await sdk.sessions.forUser('bench-sdk');
    const agent = await sdk.agents.create(session.id, { timeout: '1h' });
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const env = { BERTH_URL: berth.baseUrl, BERTH_API_KEY: key };
    const rows = {
      exec: { sdk: [] as number[], floor: [] as number[] },
      stream: { sdk: [] as number[], floor: [] as number[] },
      list: { cli: [] as number[], floor: [] as number[] },
      cliExec: { cli: [] as number[], floor: [] as number[] },
      create: { sdk: [] as number[], floor: [] as number[] },
    };
    // A warm pool of one: each create below claims its sandbox, and the next waits for the refill.
    const api = berth.api(key);
    const pool = (await api.post('/v1/warm-pools', { compute: 'python', size: 1 })).body;
    let claims = 0;
    const refilled = () =>
      eventually(
        async () => {
          const now = (await api.get(`/v1/warm-pools/${pool.id}`)).body;
          return now.ready === 1 && now.claims >= claims ? true : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 50, what: 'the pool to refill' },
      );
    const warmCreate = async (create: () => Promise<string>) => {
      await refilled();
      const started = performance.now();
      const id = await create();
      const ms = performance.now() - started;
      claims++;
      const agent = (await api.get(`/v1/agents/${id}`)).body;
      if (agent.status !== 'idle' || !String(agent.conditions[0]?.message).includes('warm pool')) throw new Error(`agent ${id} did not claim the warm sandbox: ${JSON.stringify(agent)}`);
      await api.post(`/v1/agents/${id}/terminate`);
      return ms;
    };
    const fetchCreate = async () => {
      const created = (await (await fetch(`${berth.baseUrl}/v1/sessions/${session.id}/agents?waitFor=idle`, { method: 'POST', headers, body: JSON.stringify({ timeout: '1h' }) })).json()) as { id: string; status: string };
      if (created.status !== 'idle') throw new Error(`agent ${created.id} is ${created.status}`);
      return created.id;
    };
    const createWithSdk = async () => (await sdk.agents.create(session.id, { timeout: '1h' })).id;
    const fetchList = `const r = await fetch(process.env.BERTH_URL + '/v1/agents', { headers: { authorization: 'Bearer ' + process.env.BERTH_API_KEY } }); if (!r.ok) process.exit(1); await r.json();`;
    const fetchExec = `const r = await fetch(process.env.BERTH_URL + '/v1/agents/${agent.id}/exec', { method: 'POST', headers: { authorization: 'Bearer ' + process.env.BERTH_API_KEY, 'content-type': 'application/json' }, body: JSON.stringify({ language: 'bash', code: 'true' }) }); if ((await r.json()).exitCode !== 0) process.exit(1);`;
    for (let i = 0; i < RUNS + 1; i++) {
      // The first round warms the sandbox and the caches; each measure sits beside its floor in the same round.
      const floorExec = await timedAsync(async () => (await fetch(`${berth.baseUrl}/v1/agents/${agent.id}/exec`, { method: 'POST', headers, body: JSON.stringify({ language: 'bash', code: 'true' }) })).json());
      const sdkExec = await timedAsync(() => agent.exec.bash('true'));
      const floorStream = await timedAsync(async () => {
        const response = await fetch(`${berth.baseUrl}/v1/agents/${agent.id}/exec/stream`, { method: 'POST', headers, body: JSON.stringify({ language: 'bash', code: 'echo x' }) });
        let text = '';
        for await (const chunk of response.body!) {
          text += new TextDecoder().decode(chunk as Uint8Array);
          if (text.includes('event: exit')) break;
        }
      });
      const sdkStream = await timedAsync(async () => {
        for await (const chunk of agent.exec.stream({ language: 'bash', code: 'echo x' })) if (chunk.type === 'exit') break;
      });
      const floorList = await timedAsync(() => node(['--input-type=module', '-e', fetchList], env));
      const cliList = await timedAsync(() => node([BIN, 'agents', 'list', '--json'], env));
      const floorCliExec = await timedAsync(() => node(['--input-type=module', '-e', fetchExec], env));
      const cliExec = await timedAsync(() => node([BIN, 'agents', 'exec', agent.id, '--', 'true'], env));
      // Each goes first in every other round: the second shares the machine with the first's terminate.
      let floorCreate: number;
      let sdkCreate: number;
      if (i % 2 === 0) {
        floorCreate = await warmCreate(fetchCreate);
        sdkCreate = await warmCreate(createWithSdk);
      } else {
        sdkCreate = await warmCreate(createWithSdk);
        floorCreate = await warmCreate(fetchCreate);
      }
      if (i === 0) continue;
      rows.exec.floor.push(floorExec);
      rows.exec.sdk.push(sdkExec);
      rows.stream.floor.push(floorStream);
      rows.stream.sdk.push(sdkStream);
      rows.list.floor.push(floorList);
      rows.list.cli.push(cliList);
      rows.cliExec.floor.push(floorCliExec);
      rows.cliExec.cli.push(cliExec);
      rows.create.floor.push(floorCreate);
      rows.create.sdk.push(sdkCreate);
    }
    printFloorTable(`The SDK and the CLI against plain fetch (${RUNS} runs each, interleaved)`, [
      { name: 'SDK exec bash true', samples: rows.exec.sdk, floorName: 'fetch POST /exec', floor: rows.exec.floor },
      { name: 'SDK exec.stream to exit', samples: rows.stream.sdk, floorName: 'fetch POST /exec/stream', floor: rows.stream.floor },
      { name: 'CLI agents list --json', samples: rows.list.cli, floorName: 'node + fetch GET /v1/agents', floor: rows.list.floor },
      { name: 'CLI agents exec true', samples: rows.cliExec.cli, floorName: 'node + fetch POST /exec', floor: rows.cliExec.floor },
      { name: 'SDK create → idle (warm)', samples: rows.create.sdk, floorName: 'fetch POST ?waitFor=idle', floor: rows.create.floor },
    ]);
    await api.raw(`/v1/warm-pools/${pool.id}`, { method: 'DELETE' });
    await agent.terminate();
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
});
