/**
 * `make bench`: what a round trip costs on this machine, back to back and after the machine was
 * idle for a moment. A lone request (a warm create, one exec between two model calls) meets the
 * second cost, a loop the first; the absolute targets (a warm create in 10 ms) depend on it.
 * - a TCP round trip of a few bytes between two processes on loopback;
 * - `GET /v1/sessions/{id}` on `berth up` (its key's check and one read of PostgreSQL);
 * each once back to back and once with `BENCH_GAP_MS` (100) of quiet before each, interleaved by
 * rounds so that both meet the same machine. Node's version is printed: the same server does less
 * work per request on newer ones.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createConnection, createServer, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { startBerth, tempDir } from '../helpers/berth.js';
import { removeDataDir } from '../helpers/runsc.js';
import { printFloorTable, runBench } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 100);
const GAP_MS = Number(process.env.BENCH_GAP_MS ?? 100);
const ROUNDS = 4;

/** In the child: echo every byte back on loopback, and tell the parent the port. */
function echoServer(): void {
  const server = createServer((socket) => socket.on('data', (data) => socket.write(data)));
  server.listen(0, '127.0.0.1', () => process.send!((server.address() as { port: number }).port));
}

/** Starts the echo process and connects to it: a round trip is one byte there and back. */
async function echoPeer(): Promise<{ roundTrip: () => Promise<number>; close: () => void }> {
  const child: ChildProcess = fork(new URL(import.meta.url).pathname, ['echo'], { execArgv: process.execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (message) => resolve(message as number));
    child.once('exit', (code) => reject(new Error(`the echo process exited with ${code}`)));
  });
  const socket: Socket = await new Promise((resolve, reject) => {
    const connection = createConnection({ port, host: '127.0.0.1', noDelay: true }, () => resolve(connection));
    connection.once('error', reject);
  });
  return {
    roundTrip: () =>
      new Promise<number>((resolve) => {
        const started = performance.now();
        socket.once('data', () => resolve(performance.now() - started));
        socket.write('x');
      }),
    close: () => {
      socket.destroy();
      child.kill();
    },
  };
}

/** `RUNS` round trips back to back, and `RUNS` each after `GAP_MS` of quiet, in `ROUNDS` interleaved rounds (the first of each round not counted). */
async function both(roundTrip: () => Promise<number>): Promise<{ backToBack: number[]; afterGap: number[] }> {
  const backToBack: number[] = [];
  const afterGap: number[] = [];
  const perRound = Math.max(1, Math.ceil(RUNS / ROUNDS));
  for (let round = 0; round < ROUNDS; round++) {
    await roundTrip();
    for (let i = 0; i < perRound; i++) backToBack.push(await roundTrip());
    for (let i = 0; i < perRound; i++) {
      await sleep(GAP_MS);
      afterGap.push(await roundTrip());
    }
  }
  return { backToBack, afterGap };
}

async function main(): Promise<void> {
  const peer = await echoPeer();
  const dataDir = tempDir('berth-bench-machine-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  try {
    const tcp = await both(peer.roundTrip);
    const api = berth.api(berth.liveKey);
    // A session to read: one read of PostgreSQL after the key's, and no sandbox busy beside it.
    const sessionId = (await api.post('/v1/sessions', { userId: 'bench-machine' })).body.id;
    const read = async () => {
      const started = performance.now();
      const answer = await api.get(`/v1/sessions/${sessionId}`);
      if (answer.status !== 200) throw new Error(`GET: ${JSON.stringify(answer.body)}`);
      return performance.now() - started;
    };
    // Node compiles the server's hot paths on their first uses: those are not what is measured.
    for (let i = 0; i < 50; i++) await read();
    const get = await both(read);
    printFloorTable(`What a round trip costs on this machine (Node ${process.version}, ${RUNS} each way, ${GAP_MS} ms of quiet before each)`, [
      { name: 'TCP round trip, 2 processes, after quiet', samples: tcp.afterGap, floorName: 'the same, back to back', floor: tcp.backToBack },
      { name: 'GET /v1/sessions/{id}, after quiet', samples: get.afterGap, floorName: 'the same, back to back', floor: get.backToBack },
      { name: 'GET /v1/sessions/{id}, after quiet', samples: get.afterGap, floorName: 'TCP round trip, after quiet', floor: tcp.afterGap },
    ]);
    console.log(
      '\nratio = p50 / floor p50. A request that finds the machine idle pays for waking each process it passes through\n' +
        '(client, server, PostgreSQL): a lone warm create or exec is measured in that state, a loop is not.',
    );
  } finally {
    peer.close();
    await berth.stop();
    removeDataDir(dataDir);
  }
}

if (process.argv[2] === 'echo') echoServer();
else runBench(main);
