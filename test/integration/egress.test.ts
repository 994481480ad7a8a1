import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readdirSync, readlinkSync, readSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCertificateAuthority, issueServerCertificate, newServerKey } from '../../providers/src/local/index.js';
import { startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';
import { startDnsServer } from '../helpers/dns-server.js';
import { fetchInSandbox } from '../helpers/sandbox-fetch.js';

/**
 * Egress policies (ADR 46) through a real `berth up` with real gVisor sandboxes. The outside is
 * two HTTPS servers on host loopback addresses, which a sandbox (no network device of its own)
 * can reach only through the egress proxy: `api.egress.test` (127.0.0.1, by a DNS server of the
 * test's that the proxy is told to use) with a certificate for that name, and 127.0.0.2 with one
 * for that address, both from a test CA that the proxy is told to trust (BERTH_EGRESS_CA_FILE)
 * and the sandbox is not.
 */
const TOKEN = `tok_${randomBytes(20).toString('hex')}`;
const dataDir = tempDir('berth-egress-');
const upstreamCa = createCertificateAuthority('egress test upstream CA');
const seen: { server: string; path: string; authorization: string | undefined }[] = [];
let named: Server;
let byAddress: Server;
let namedPort: number;
let plain: HttpServer;
let plainPort: number;
let addressPort: number;
let berth: BerthProcess;
let dns: { address: string; close(): void };
let berthEnv: Record<string, string>;
let api: ApiClient;
let sessionId: string;
/** The agent the policy tests run in, created by the first. */
let agentId: string;

async function upstream(name: string, host: string, listenOn: string): Promise<Server> {
  const issued = issueServerCertificate(upstreamCa, host, newServerKey());
  const server = createServer({ cert: issued.certificatePem, key: issued.keyPem }, (req, res) => {
    seen.push({ server: name, path: req.url ?? '', authorization: req.headers.authorization });
    // The server checks the bound credential itself, and never echoes it.
    const authorized = req.headers.authorization === `Bearer ${TOKEN}`;
    res.writeHead(authorized || req.url !== '/private' ? 200 : 401, { 'content-type': 'text/plain' });
    res.end(`${name} ${req.url} ${authorized ? 'authorized' : 'anonymous'}\n`);
  });
  server.listen(0, listenOn);
  await once(server, 'listening');
  return server;
}

/** `fetchInSandbox` in this file's agent API; `trustUpstreamCa`: the test CA copied into the workspace, instead of the sandbox's bundle. */
function fetchFrom(agentId: string, url: string, options: { trustUpstreamCa?: boolean } = {}): Promise<string> {
  return fetchInSandbox(api, agentId, url, options.trustUpstreamCa ? '/workspace/upstream-ca.pem' : undefined);
}

/** How often each needle occurs in the sandbox's memory file (gVisor's `runsc-memory`), read from the host. */
function sandboxMemoryHits<T extends Record<string, Buffer>>(agentId: string, needles: T): { [K in keyof T]: number } & { scannedBytes: number } {
  const state = JSON.parse(execFileSync('runsc', [`--root=${join(dataDir, 'runsc')}`, 'state', agentId], { encoding: 'utf8' })) as { pid: number };
  const fd = readdirSync(`/proc/${state.pid}/fd`).find((entry) => readlinkSync(`/proc/${state.pid}/fd/${entry}`).startsWith('/memfd:runsc-memory'));
  expect(fd, 'the sandbox memory file').toBeDefined();
  const file = openSync(`/proc/${state.pid}/fd/${fd}`, 'r');
  const counts: Record<string, number> = Object.fromEntries(Object.keys(needles).map((name) => [name, 0]));
  const overlap = Math.max(...Object.values(needles).map((needle) => needle.length)) - 1;
  const chunk = Buffer.alloc(16 << 20);
  let carried = Buffer.alloc(0);
  let scannedBytes = 0;
  try {
    for (;;) {
      const read = readSync(file, chunk, 0, chunk.length, null);
      if (read === 0) break;
      scannedBytes += read;
      const window = Buffer.concat([carried, chunk.subarray(0, read)]);
      for (const [name, needle] of Object.entries(needles)) {
        for (let at = window.indexOf(needle); at >= 0; at = window.indexOf(needle, at + 1)) {
          // A match wholly inside the carried bytes was counted in the previous window.
          if (at + needle.length > carried.length) counts[name]!++;
        }
      }
      carried = Buffer.from(window.subarray(Math.max(0, window.length - overlap)));
    }
  } finally {
    closeSync(file);
  }
  return { ...counts, scannedBytes } as { [K in keyof T]: number } & { scannedBytes: number };
}

function putJson(path: string, body: unknown) {
  return api.raw(path, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function idle(agentId: string): Promise<void> {
  await eventually(async () => {
    const agent = await api.get(`/v1/agents/${agentId}`);
    if (agent.body.status === 'failed') throw new Error(JSON.stringify(agent.body));
    return agent.body.status === 'idle' ? true : undefined;
  }, { what: 'agent idle', timeoutMs: 90_000 });
}

beforeAll(async () => {
  dns = await startDnsServer({ 'api.egress.test': '127.0.0.1', 'other.egress.test': '127.0.0.1' });
  named = await upstream('named', 'api.egress.test', '127.0.0.1');
  byAddress = await upstream('by-address', '127.0.0.2', '127.0.0.2');
  namedPort = (named.address() as AddressInfo).port;
  plain = createHttpServer((req, res) => {
    seen.push({ server: 'plain', path: req.url ?? '', authorization: req.headers.authorization });
    res.end(`plain ${req.url}\n`);
  });
  plain.listen(0, '127.0.0.1');
  await once(plain, 'listening');
  plainPort = (plain.address() as AddressInfo).port;
  addressPort = (byAddress.address() as AddressInfo).port;
  const caFile = join(dataDir, 'upstream-ca.pem');
  writeFileSync(caFile, upstreamCa.certificatePem);
  berthEnv = { DATABASE_URL: await createTestDatabase(), BERTH_EGRESS_CA_FILE: caFile, BERTH_EGRESS_DNS_SERVERS: dns.address, BERTH_EGRESS_ALLOW: 'pypi.org,*.pythonhosted.org' };
  berth = await startBerth({ dataDir, env: berthEnv });
  api = berth.api(berth.liveKey!);
  expect((await api.post('/v1/secrets', { UPSTREAM_TOKEN: TOKEN })).status).toBe(200);
  sessionId = (await api.post('/v1/sessions/by-user/egress', {})).body.id;
}, 120_000);

afterAll(async () => {
  await berth?.stop();
  removeDataDir(dataDir);
  named?.close();
  plain?.close();
  dns?.close();
  byAddress?.close();
});

describe('egress policy', () => {
  it('reaches an allowed host, refuses others with the reason, and adds the bound credential', async () => {
    const created = await api.post(`/v1/sessions/${sessionId}/agents`, {
      timeout: '10m',
      egress: { hosts: ['*.egress.test'], cidrs: ['127.0.0.1/32'], credentials: [{ host: 'api.egress.test', secret: 'UPSTREAM_TOKEN' }] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    agentId = created.body.id;
    expect(created.body.egress).toEqual({
      hosts: ['*.egress.test'],
      cidrs: ['127.0.0.1/32'],
      credentials: [{ host: 'api.egress.test', secret: 'UPSTREAM_TOKEN', header: 'Authorization', prefix: 'Bearer ' }],
    });
    await idle(agentId);

    // TLS to api.egress.test (a credential is bound to it) is terminated by the proxy with the sandbox's CA, which the sandbox trusts by default.
    expect(await fetchFrom(agentId, `https://api.egress.test:${namedPort}/private`)).toBe('200 named /private authorized');
    expect(seen.at(-1)).toEqual({ server: 'named', path: '/private', authorization: `Bearer ${TOKEN}` });

    // Plain http:// is forwarded when allowed, never with the credential: it would travel in clear.
    expect(await fetchFrom(agentId, `http://api.egress.test:${plainPort}/plain`)).toBe('200 plain /plain');
    expect(seen.at(-1)).toEqual({ server: 'plain', path: '/plain', authorization: undefined });

    expect(await fetchFrom(agentId, 'https://example.com/')).toMatch(/403 berth egress: example\.com is not in the agent's egress hosts/);
    expect(await fetchFrom(agentId, `https://127.0.0.2:${addressPort}/`)).toMatch(/403 berth egress: 127\.0\.0\.2 is not in the agent's egress cidrs/);
    // Without a proxy the sandbox has no way out at all: it has no network device.
    const direct = await api.post(`/v1/agents/${agentId}/exec`, {
      language: 'python',
      code: "import socket\ntry:\n    socket.create_connection(('127.0.0.2', " + addressPort + "), timeout=5)\n    print('connected')\nexcept OSError as error:\n    print('refused', error.errno)",
    });
    expect(direct.body.stdout).toMatch(/^refused/);
  }, 180_000);

  it('takes a changed policy while the agent runs: a CIDR added, a host removed', async () => {
    await api.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: `cat > /workspace/upstream-ca.pem <<'EOF'\n${upstreamCa.certificatePem}EOF` });
    const patched = await api.patch(`/v1/agents/${agentId}`, { egress: { hosts: [], cidrs: ['127.0.0.2/32'] } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.egress).toEqual({ hosts: [], cidrs: ['127.0.0.2/32'], credentials: [] });
    // A tunnel without a bound credential is passed through: TLS is the sandbox's own, end to end.
    await eventually(async () => {
      const answer = await fetchFrom(agentId, `https://127.0.0.2:${addressPort}/open`, { trustUpstreamCa: true });
      return answer === '200 by-address /open anonymous' ? answer : undefined;
    }, { what: 'the CIDR taking effect', timeoutMs: 20_000 });
    expect(seen.at(-1)).toEqual({ server: 'by-address', path: '/open', authorization: undefined });
    expect(await fetchFrom(agentId, `https://api.egress.test:${namedPort}/private`)).toMatch(/403 berth egress: api\.egress\.test is not in the agent's egress hosts/);
    // A name allowed by hosts that resolves to a private address needs that address in cidrs too.
    await api.patch(`/v1/agents/${agentId}`, { egress: { hosts: ['api.egress.test'], cidrs: [] } });
    await eventually(async () => {
      const answer = await fetchFrom(agentId, `https://api.egress.test:${namedPort}/private`);
      return /a private address not in the agent's egress cidrs/.test(answer) ? answer : undefined;
    }, { what: 'the private address refused', timeoutMs: 20_000 });
  }, 180_000);

  it('keeps the credential out of the sandbox: environment, /proc and memory', async () => {
    await api.patch(`/v1/agents/${agentId}`, {
      egress: { hosts: ['*.egress.test'], cidrs: ['127.0.0.1/32'], credentials: [{ host: 'api.egress.test', secret: 'UPSTREAM_TOKEN' }] },
    });
    await eventually(async () => ((await fetchFrom(agentId, `https://api.egress.test:${namedPort}/private`)) === '200 named /private authorized' ? true : undefined), {
      what: 'the credential again',
      timeoutMs: 20_000,
    });
    // A process that holds a marker of its own in memory: the scan below must find it, so that not finding the token means something.
    const marker = await api.post(`/v1/agents/${agentId}/exec`, {
      language: 'bash',
      code: "python3 -c \"import time; held = 'MARK' + 'ER-' + 'in-memory'; time.sleep(600)\"",
      background: true,
    });
    expect(marker.status, JSON.stringify(marker.body)).toBe(202);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // The sandbox's memory, all of it: gVisor keeps its programs' memory in one memory file of the
    // sandbox process on the host, read here from outside (programs inside cannot read each other's).
    const hits = sandboxMemoryHits(agentId, { marker: Buffer.from('MARKER-in-memory'), token: Buffer.from(TOKEN) });
    expect(hits.scannedBytes).toBeGreaterThan(100_000_000);
    expect(hits.marker).toBeGreaterThanOrEqual(1);
    expect(hits.token).toBe(0);

    // Last, as this program brings the token into the sandbox itself (in halves, joined at run time, its own process skipped).
    const half = TOKEN.length >> 1;
    const env = await api.post(`/v1/agents/${agentId}/exec`, {
      language: 'python',
      code: [
        'import os',
        `needle = (${JSON.stringify(TOKEN.slice(0, half))} + ${JSON.stringify(TOKEN.slice(half))}).encode()`,
        'hits = 0',
        'for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:',
        '    for name in ("environ", "cmdline"):',
        '        try:',
        '            hits += needle in open(f"/proc/{pid}/{name}", "rb").read()',
        '        except OSError:',
        '            pass',
        'own = any(needle in value.encode() for value in os.environ.values())',
        'print(hits, own, os.environ["HTTPS_PROXY"], os.environ["SSL_CERT_FILE"])',
      ].join('\n'),
    });
    expect(env.body.stdout.trim()).toBe('0 False http://127.0.0.1:3128 /run/berth/egress/ca-bundle.pem');
  }, 180_000);

  it('keeps the policy and the CA across a pause and resume (a native checkpoint restored)', async () => {
    const paused = await api.post(`/v1/agents/${agentId}/pause`);
    expect(paused.status, JSON.stringify(paused.body)).toBe(200);
    expect(paused.body.status).toBe('paused');
    const resumed = await api.post(`/v1/agents/${agentId}/resume`);
    expect(resumed.status, JSON.stringify(resumed.body)).toBeLessThan(300);
    await idle(agentId);
    expect(await fetchFrom(agentId, `https://api.egress.test:${namedPort}/private`)).toBe('200 named /private authorized');
    expect(await fetchFrom(agentId, 'https://example.com/')).toMatch(/403 berth egress: example\.com is not in the agent's egress hosts/);
  }, 180_000);

  it('counts what it allowed, denied and injected', async () => {
    const samples = parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text());
    const value = (name: string, labels: Record<string, string> = {}) =>
      samples.filter((sample) => sample.name === name && Object.entries(labels).every(([key, v]) => sample.labels[key] === v)).reduce((sum, sample) => sum + sample.value, 0);
    expect(value('berth_egress_requests_total', { decision: 'allowed' })).toBeGreaterThanOrEqual(3);
    expect(value('berth_egress_requests_total', { decision: 'denied' })).toBeGreaterThanOrEqual(3);
    expect(value('berth_egress_credentials_injected_total')).toBeGreaterThanOrEqual(2);
  });
});

describe('egress after a restart of Berth', () => {
  it('adopts the running sandbox: its listener, CA and policy come back', async () => {
    const key = berth.liveKey!;
    expect(await berth.stop()).toBe(0);
    berth = await startBerth({ dataDir, env: berthEnv });
    api = berth.api(key);
    await eventually(async () => {
      const answer = await fetchFrom(agentId, `https://api.egress.test:${namedPort}/private`);
      return answer === '200 named /private authorized' ? answer : undefined;
    }, { what: 'egress after the restart', timeoutMs: 30_000 });
    expect(await fetchFrom(agentId, `https://127.0.0.2:${addressPort}/`)).toMatch(/403 berth egress: 127\.0\.0\.2 is not in the agent's egress cidrs/);
  }, 180_000);
});

describe('egress settings', () => {
  it('gives agents without a policy the install default, and definitions theirs', async () => {
    const plain = await api.post(`/v1/sessions/${sessionId}/agents`, { timeout: '1m' });
    expect(plain.status).toBe(201);
    expect(plain.body.egress).toEqual({ hosts: ['pypi.org', '*.pythonhosted.org'], cidrs: [], credentials: [] });
    const definition = await api.post('/v1/agent-definitions', { name: 'egress-definition', egress: { hosts: ['*.github.com'] } });
    expect(definition.status, JSON.stringify(definition.body)).toBe(201);
    expect(definition.body.egress).toEqual({ hosts: ['*.github.com'], cidrs: [], credentials: [] });
    const fromDefinition = await api.post(`/v1/sessions/${sessionId}/agents`, { definition: 'egress-definition', timeout: '1m' });
    expect(fromDefinition.status, JSON.stringify(fromDefinition.body)).toBe(201);
    expect(fromDefinition.body.egress).toEqual({ hosts: ['*.github.com'], cidrs: [], credentials: [] });
    // A new version replaces the policy; null removes it, and agents made from it get the install default again.
    const updated = await putJson(`/v1/agent-definitions/${definition.body.id}`, { egress: { hosts: ['api.github.com'], cidrs: ['192.0.2.0/24'] } });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body).toMatchObject({ version: 2, egress: { hosts: ['api.github.com'], cidrs: ['192.0.2.0/24'], credentials: [] } });
    const removed = await putJson(`/v1/agent-definitions/${definition.body.id}`, { egress: null });
    expect(removed.body.version).toBe(3);
    expect(removed.body.egress).toBeUndefined();
    const afterRemoval = await api.post(`/v1/sessions/${sessionId}/agents`, { definition: 'egress-definition', timeout: '1m' });
    expect(afterRemoval.body.egress).toEqual({ hosts: ['pypi.org', '*.pythonhosted.org'], cidrs: [], credentials: [] });
    const badDefinition = await api.post('/v1/agent-definitions', { name: 'bad-egress', egress: { hosts: ['*'] } });
    expect(badDefinition.status).toBe(422);
    expect(Object.keys(badDefinition.body.error.details.fields)).toContain('egress.hosts.0');
    for (const agent of [plain, fromDefinition, afterRemoval]) await api.post(`/v1/agents/${agent.body.id}/terminate`, {});
  });

  it.each([
    [{ hosts: ['Bad_Host'] }, 'egress.hosts.0'],
    [{ hosts: ['ok.example', 'api.*.example'] }, 'egress.hosts.1'],
    [{ hosts: ['10.0.0.1'] }, 'egress.hosts.0'],
    [{ cidrs: ['10.0.0.0/33'] }, 'egress.cidrs.0'],
    [{ cidrs: ['10.0.0.0'] }, 'egress.cidrs.0'],
    [{ hosts: ['pypi.org'], credentials: [{ host: 'api.github.com', secret: 'UPSTREAM_TOKEN' }] }, 'egress.credentials.0.host'],
    [{ hosts: ['api.github.com'], credentials: [{ host: 'api.github.com', secret: 'NO_SUCH_SECRET' }] }, 'egress.credentials.0.secret'],
    [{ hosts: [], ports: [443] }, 'egress'],
  ])('refuses %j with 422 naming %s, at creation and in PATCH', async (egress, field) => {
    const before = (await api.get(`/v1/sessions/${sessionId}/agents?limit=100`)).body.data.length;
    const created = await api.post(`/v1/sessions/${sessionId}/agents`, { egress });
    expect(created.status).toBe(422);
    expect(created.body.error.code).toBe('unprocessable_entity');
    expect(Object.keys(created.body.error.details.fields)).toContain(field);
    expect((await api.get(`/v1/sessions/${sessionId}/agents?limit=100`)).body.data.length).toBe(before);

    const policy = (await api.get(`/v1/agents/${agentId}`)).body.egress;
    const patched = await api.patch(`/v1/agents/${agentId}`, { egress, timeout: '20m' });
    expect(patched.status).toBe(422);
    expect(Object.keys(patched.body.error.details.fields)).toContain(field);
    const after = (await api.get(`/v1/agents/${agentId}`)).body;
    expect({ egress: after.egress, timeout: after.timeout }).toEqual({ egress: policy, timeout: '10m' });
  });
});
