/**
 * `make bench` (files and ports, ADR 40): the API's streamed file transfer and the port proxy,
 * against floors measured in the same run on the same sandbox.
 *   upload     PUT /files of BENCH_FILE_MB MB            floor: the same bytes piped into `runsc exec <sandbox> cat > file`
 *   download   GET /files of that file                   floor: `runsc exec <sandbox> cat file` read from its stdout
 *   proxy GET  a small page of `python3 -m http.server` in the sandbox through /ports/…/proxy/
 *                                                          floor: the same GET made inside the sandbox (python urllib, timed there)
 * Throughput is printed as milliseconds per transfer (and MB/s); ratios are p50 over the floor's p50.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { startBerth, tempDir } from '../helpers/berth.js';
import type { ApiClient } from '../helpers/http.js';
import { removeDataDir, runscContainers } from '../helpers/runsc.js';
import { percentile, printFloorTable, runBench } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 10);
const FILE_MB = Number(process.env.BENCH_FILE_MB ?? (RUNS <= 2 ? 4 : 64));
const PAGE_PORT = 8000;

async function idleAgent(api: ApiClient): Promise<string> {
  const session = (await api.post('/v1/sessions', { userId: 'bench-files' })).body;
  const agent = (await api.post(`/v1/sessions/${session.id}/agents`, { timeout: '1h' })).body;
  for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
    if ((await api.get(`/v1/agents/${agent.id}`)).body.status === 'idle') return agent.id;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`agent ${agent.id} did not become idle`);
}

/** Runs `runsc exec` with `input` on its stdin; resolves with its stdout's digest and the milliseconds it took. */
function runscExec(runscRoot: string, sandbox: string, argv: string[], input?: Buffer): Promise<{ ms: number; digest: string; length: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn('runsc', [runscRoot, 'exec', sandbox, ...argv], { stdio: ['pipe', 'pipe', 'inherit'] });
    const digest = createHash('sha256');
    let length = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      digest.update(chunk);
      length += chunk.length;
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve({ ms: performance.now() - started, digest: digest.digest('hex'), length }) : reject(new Error(`runsc exec ${argv.join(' ')} exited ${code}`))));
    child.stdin.end(input);
  });
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-files-');
  const berth = await startBerth({ dataDir, env: { BERTH_LOG_LEVEL: 'warn' } });
  try {
    const api = berth.api(berth.liveKey);
    const auth = { authorization: `Bearer ${berth.liveKey}` };
    const agentId = await idleAgent(api);
    const runscRoot = `--root=${join(dataDir, 'runsc')}`;
    const sandbox = runscContainers(dataDir).find((container) => container.id.includes(agentId.slice(4)) || container.id === agentId)?.id ?? agentId;
    const body = randomBytes(FILE_MB * 1024 * 1024);
    const digest = createHash('sha256').update(body).digest('hex');

    const upload: number[] = [];
    const uploadFloor: number[] = [];
    const download: number[] = [];
    const downloadFloor: number[] = [];
    for (let i = 0; i < RUNS + 1; i++) {
      const floorIn = await runscExec(runscRoot, sandbox, ['sh', '-c', 'cat > /workspace/floor.bin'], body);
      let started = performance.now();
      const put = await fetch(`${berth.baseUrl}/v1/agents/${agentId}/files?path=bench.bin`, {
        method: 'PUT',
        headers: { ...auth, 'content-type': 'application/octet-stream' },
        body: Readable.toWeb(Readable.from([body])) as ReadableStream,
        duplex: 'half',
      } as RequestInit);
      if (put.status !== 201) throw new Error(`upload answered ${put.status}: ${await put.text()}`);
      await put.arrayBuffer();
      const uploaded = performance.now() - started;

      const floorOut = await runscExec(runscRoot, sandbox, ['cat', '/workspace/floor.bin']);
      if (floorOut.digest !== digest) throw new Error('the floor read back other bytes');
      started = performance.now();
      const get = await fetch(`${berth.baseUrl}/v1/agents/${agentId}/files?path=bench.bin`, { headers: auth });
      const received = createHash('sha256');
      for await (const chunk of Readable.fromWeb(get.body as never)) received.update(chunk as Buffer);
      const downloaded = performance.now() - started;
      if (received.digest('hex') !== digest) throw new Error('the download is not the bytes uploaded');
      if (i === 0) continue; // the first of each warms the sandbox and the process
      upload.push(uploaded);
      uploadFloor.push(floorIn.ms);
      download.push(downloaded);
      downloadFloor.push(floorOut.ms);
    }

    // The proxy: a page of python's http.server, through the proxy and from inside the sandbox.
    await api.post(`/v1/agents/${agentId}/files/mkdir`, { path: 'site', parents: true });
    await api.raw(`/v1/agents/${agentId}/files?path=site/index.html`, { method: 'PUT', body: '<h1>bench</h1>', headers: { 'content-type': 'application/octet-stream' } });
    await api.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: `cd /workspace/site && exec python3 -m http.server ${PAGE_PORT} --bind 127.0.0.1`, background: true });
    await api.post(`/v1/agents/${agentId}/ports`, { port: PAGE_PORT });
    const pageUrl = `${berth.baseUrl}/v1/agents/${agentId}/ports/${PAGE_PORT}/proxy/index.html`;
    for (let deadline = Date.now() + 20_000; (await fetch(pageUrl, { headers: auth })).status !== 200; ) {
      if (Date.now() > deadline) throw new Error('the page never answered through the proxy');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const proxied: number[] = [];
    const proxyRuns = RUNS * 5;
    for (let i = 0; i < proxyRuns; i++) {
      const started = performance.now();
      const response = await fetch(pageUrl, { headers: auth });
      if ((await response.text()) !== '<h1>bench</h1>') throw new Error('the proxy answered another page');
      proxied.push(performance.now() - started);
    }
    const inside = await api.post(`/v1/agents/${agentId}/exec`, {
      language: 'python',
      code: [
        'import time, urllib.request',
        'samples = []',
        `for _ in range(${proxyRuns}):`,
        '    started = time.perf_counter()',
        `    urllib.request.urlopen('http://127.0.0.1:${PAGE_PORT}/index.html').read()`,
        '    samples.append((time.perf_counter() - started) * 1000)',
        'print(" ".join(f"{s:.3f}" for s in samples))',
      ].join('\n'),
    });
    const direct = String(inside.body.stdout).trim().split(/\s+/).map(Number);

    const mbps = (samples: number[]) => ((FILE_MB / percentile(samples, 50)) * 1000).toFixed(0);
    printFloorTable(`Berth files and ports (local provider), ${RUNS} transfers of ${FILE_MB} MB, ${proxyRuns} proxied requests`, [
      { name: `upload ${FILE_MB} MB (PUT /files)`, samples: upload, floorName: 'runsc exec cat > file', floor: uploadFloor },
      { name: `download ${FILE_MB} MB (GET /files)`, samples: download, floorName: 'runsc exec cat file', floor: downloadFloor },
      { name: 'proxy GET of a page', samples: proxied, floorName: 'same GET inside sandbox', floor: direct },
    ]);
    console.log(
      `\nthroughput p50: upload ${mbps(upload)} MB/s (floor ${mbps(uploadFloor)} MB/s), download ${mbps(download)} MB/s (floor ${mbps(downloadFloor)} MB/s).\n` +
        'The transfer floors pay one `runsc exec` start each (about 40 ms); the proxy floor has no HTTP hop from outside the sandbox, no authentication and no tunnel.',
    );
  } finally {
    await berth.stop();
    removeDataDir(dataDir);
  }
}

runBench(main);
