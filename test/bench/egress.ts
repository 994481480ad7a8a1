/**
 * `make bench` (egress): the latency the egress proxy (ADR 46) adds to one HTTPS request, beside
 * the same request made straight from the host in the same run (the floor). Each request opens
 * its own connection, as a client without keep-alive does, and reads a small answer:
 *
 *   tunnel            CONNECT through the relay and the proxy, TLS end to end to the server
 *                     (a host with no credential bound to it)
 *   credential        CONNECT to a host with a credential bound: the proxy terminates TLS with the
 *                     sandbox's CA, adds the header and sends the request on over its own TLS
 *                     connection (kept alive to the server)
 *   gateway tunnel    the same tunnel through the gateway front (ADR 52): one TCP listener that
 *   gateway credential   names the sandbox by the source address, as the operator serves pods,
 *                     with the identification a gateway replica makes for each connection (its
 *                     policy and CA kept, as between two requests within the policy's second)
 *   floor             a TLS connection straight to the server and the same request
 *
 * The path is the production one but for where the relay runs: egress-relay.py runs on the host
 * (on a loopback port) rather than inside gVisor, so gVisor's loopback hop to the relay is not in
 * the figure. Names are resolved by the proxy through a local DNS server on every request.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:https';
import { request as httpRequest } from 'node:http';
import { connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { rootCertificates } from 'node:tls';
import { silentLogger } from '../../common/src/index.js';
import { createCertificateAuthority, issueServerCertificate, newServerKey } from '../../providers/src/local/egress/certificates.js';
import { EgressProxy } from '../../providers/src/local/egress/proxy.js';
import { startDnsServer } from '../helpers/dns-server.js';
import { printFloorTable, runBench } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const WARMUP = Math.min(20, RUNS);
const ROOT = join(import.meta.dirname, '..', '..');

runBench(async () => {
  const upstreamCa = createCertificateAuthority('bench upstream CA');
  const servers = await Promise.all(
    ['open.bench.test', 'api.bench.test'].map(async (host) => {
      const issued = issueServerCertificate(upstreamCa, host, newServerKey());
      const server = createServer({ cert: issued.certificatePem, key: issued.keyPem }, (req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(req.headers.authorization === 'Bearer bench-token' ? 'authorized\n' : 'anonymous\n');
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      return { host, server, port: (server.address() as AddressInfo).port };
    }),
  );
  const [open, api] = servers as [(typeof servers)[0], (typeof servers)[0]];
  const dns = await startDnsServer({ 'open.bench.test': '127.0.0.1', 'api.bench.test': '127.0.0.1' });
  const dir = mkdtempSync(join(tmpdir(), 'berth-egress-bench-'));
  const socketPath = join(dir, 'proxy.sock');
  const sandboxCa = createCertificateAuthority('bench sandbox');
  const proxy = new EgressProxy({ log: silentLogger, trustedCas: [...rootCertificates, upstreamCa.certificatePem], dnsServers: [dns.address] });
  await proxy.listen('agt_bench', socketPath, sandboxCa);
  const policy = {
    hosts: ['*.bench.test'],
    cidrs: ['127.0.0.1/32'],
    credentials: [{ host: 'api.bench.test', header: 'Authorization', value: 'Bearer bench-token' }],
  };
  proxy.setPolicy('agt_bench', policy);
  const gatewayCa = createCertificateAuthority('bench gateway sandbox');
  const gatewayPort = await proxy.listenGateway({
    port: 0,
    host: '127.0.0.1',
    identify: async (address) => (address === '127.0.0.1' ? { agentId: 'agt_gateway', egress: policy, ca: gatewayCa } : undefined),
  });
  const relayPort = 20_000 + Math.floor(Math.random() * 20_000);
  const relay = spawn('python3', ['-I', '-S', join(ROOT, 'sandbox-images', 'guest', 'egress-relay.py')], {
    env: { BERTH_EGRESS_PORT: String(relayPort), BERTH_EGRESS_SOCKET: socketPath },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  try {
    await waitForPort(relayPort);

    const direct = (target: { host: string; port: number }) => async () => {
      const socket = netConnect({ host: '127.0.0.1', port: target.port });
      await once(socket, 'connect');
      return exchange(socket, target.host, upstreamCa.certificatePem, 'anonymous');
    };
    const proxied = (target: { host: string; port: number }, ca: string, expected: string) => async () => {
      const socket = await tunnel(relayPort, `${target.host}:${target.port}`);
      return exchange(socket, target.host, ca, expected);
    };
    const throughGateway = (target: { host: string; port: number }, ca: string, expected: string) => async () => {
      const socket = await tunnel(gatewayPort, `${target.host}:${target.port}`);
      return exchange(socket, target.host, ca, expected);
    };
    const measures: [string, () => Promise<void>][] = [
      ['floor', direct(open)],
      ['tunnel', proxied(open, upstreamCa.certificatePem, 'anonymous')],
      ['credential', proxied(api, sandboxCa.certificatePem, 'authorized')],
      ['gateway tunnel', throughGateway(open, upstreamCa.certificatePem, 'anonymous')],
      ['gateway credential', throughGateway(api, gatewayCa.certificatePem, 'authorized')],
    ];
    const samples = new Map<string, number[]>(measures.map(([name]) => [name, []]));
    for (let run = 0; run < RUNS + WARMUP; run++) {
      // Interleaved, so that the others' load on this machine falls on every measure alike.
      for (const [name, measure] of measures) {
        const started = performance.now();
        await measure();
        if (run >= WARMUP) samples.get(name)!.push(performance.now() - started);
      }
    }
    const floor = samples.get('floor')!;
    printFloorTable(`egress proxy: one HTTPS request on a new connection (${RUNS} runs each; target: at most 5 ms over the floor)`, [
      { name: 'tunnel (TLS end to end)', samples: samples.get('tunnel')!, floorName: 'direct from the host', floor },
      { name: 'credential (TLS terminated, header added)', samples: samples.get('credential')!, floorName: 'direct from the host', floor },
      { name: 'gateway tunnel (TLS end to end)', samples: samples.get('gateway tunnel')!, floorName: 'direct from the host', floor },
      { name: 'gateway credential (TLS terminated, header added)', samples: samples.get('gateway credential')!, floorName: 'direct from the host', floor },
    ]);
    const p50 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    for (const name of ['tunnel', 'credential', 'gateway tunnel', 'gateway credential']) {
      console.log(`added by the proxy (${name}): ${(p50(samples.get(name)!) - p50(floor)).toFixed(2)} ms at p50`);
    }
  } finally {
    relay.kill();
    await proxy.closeAll();
    for (const { server } of servers) server.close();
    dns.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A CONNECT to a loopback port (the relay's, or the gateway's); the socket once the proxy answered 200. */
function tunnel(port: number, authority: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: 'CONNECT', path: authority, agent: false });
    req.once('connect', (answer, socket) => {
      if (answer.statusCode === 200) resolve(socket);
      else reject(new Error(`CONNECT ${authority}: ${answer.statusCode} ${answer.statusMessage}`));
    });
    req.once('error', reject);
    req.end();
  });
}

/** TLS over `socket` to `host`, one GET, and its answer checked. */
async function exchange(socket: Socket, host: string, ca: string, expected: string): Promise<void> {
  const secure = tlsConnect({ socket, servername: host, ca });
  await once(secure, 'secureConnect');
  secure.write(`GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  let text = '';
  secure.setEncoding('utf8');
  for await (const chunk of secure) text += chunk as string;
  if (!text.startsWith('HTTP/1.1 200') || !text.includes(expected)) throw new Error(`unexpected answer from ${host}: ${text.slice(0, 200)}`);
}

async function waitForPort(port: number): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const socket = netConnect({ host: '127.0.0.1', port });
    const connected = await once(socket, 'connect').then(
      () => true,
      () => false,
    );
    socket.destroy();
    if (connected) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the relay did not listen on ${port}`);
}
