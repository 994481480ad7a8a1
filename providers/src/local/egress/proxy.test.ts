import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { connect as tlsConnect, rootCertificates } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger, type SandboxEgress } from '@berth/common';
import { createCertificateAuthority, issueServerCertificate, newServerKey } from './certificates.js';
import { EgressProxy, type GatewaySandbox } from './proxy.js';

/**
 * The proxy's gateway front (ADR 52) on real sockets: which sandbox asks is the connection's
 * source address (here loopback addresses, each standing for a pod IP), and what it may reach is
 * the policy `identify` gives at that moment.
 */
describe('the egress gateway listener', () => {
  const upstreamCa = createCertificateAuthority('test upstream');
  const sandboxCa = createCertificateAuthority('Berth sandbox agt_a');
  let upstream: ReturnType<typeof createHttpsServer>;
  let upstreamPort: number;
  let proxy: EgressProxy;
  let gatewayPort: number;
  let policyOfA: SandboxEgress;
  const asked: string[] = [];
  const counted = { unknownSources: 0, injected: 0, denied: 0 };

  beforeAll(async () => {
    const issued = issueServerCertificate(upstreamCa, 'localhost', newServerKey());
    upstream = createHttpsServer({ cert: issued.certificatePem, key: issued.keyPem }, (req, res) => res.end(`authorization: ${req.headers.authorization ?? 'none'}`));
    upstream.listen(0, '127.0.0.1');
    await once(upstream, 'listening');
    upstreamPort = (upstream.address() as AddressInfo).port;
    proxy = new EgressProxy({
      log: silentLogger,
      trustedCas: [...rootCertificates, upstreamCa.certificatePem],
      metrics: {
        requests: { inc: ({ decision }) => void (decision === 'denied' && counted.denied++) },
        injected: { inc: () => void counted.injected++ },
        unknownSources: { inc: () => void counted.unknownSources++ },
      },
    });
    gatewayPort = await proxy.listenGateway({
      port: 0,
      host: '127.0.0.1',
      identify: async (address): Promise<GatewaySandbox | undefined> => {
        asked.push(address);
        if (address === '127.0.0.3') throw new Error('the database is away');
        return address === '127.0.0.1' ? { agentId: 'agt_a', egress: policyOfA, ca: sandboxCa } : undefined;
      },
    });
  });
  afterAll(async () => {
    await proxy?.closeAll();
    upstream?.close();
  });

  /** CONNECT from `source`: the tunnel's socket, or the refusal's status line. */
  function connectFrom(source: string, authority: string): Promise<Socket | string> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: gatewayPort, localAddress: source, method: 'CONNECT', path: authority, agent: false });
      req.once('connect', (answer, socket) => (answer.statusCode === 200 ? resolve(socket) : resolve(`${answer.statusCode} ${answer.statusMessage}`)));
      req.once('error', reject);
      req.end();
    });
  }

  /** One HTTPS request over a tunnel, trusting `ca`: the answer's body. */
  async function get(socket: Socket, ca: string): Promise<string> {
    const secure = tlsConnect({ socket, servername: 'localhost', ca });
    await once(secure, 'secureConnect');
    secure.write('GET / HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer from-the-sandbox\r\nConnection: close\r\n\r\n');
    let text = '';
    for await (const chunk of secure) text += String(chunk);
    return text.slice(text.indexOf('\r\n\r\n') + 4);
  }

  it('answers a source address with the policy of its sandbox, as it is at each connection', async () => {
    policyOfA = { hosts: ['localhost'], cidrs: ['127.0.0.1/32'], credentials: [] };
    const open = await connectFrom('127.0.0.1', `localhost:${upstreamPort}`);
    expect(typeof open).not.toBe('string');
    // Passed through: TLS end to end with the upstream's own certificate, the sandbox's header untouched.
    expect(await get(open as Socket, upstreamCa.certificatePem)).toBe('authorization: Bearer from-the-sandbox');
    expect(asked).toContain('127.0.0.1');

    // A host the policy does not name.
    expect(await connectFrom('127.0.0.1', `example.org:443`)).toMatch(/^403 berth egress: example\.org is not in the agent's egress hosts/);

    // The policy changed: the next connection is decided by the new one.
    policyOfA = { hosts: [], cidrs: [], credentials: [] };
    expect(await connectFrom('127.0.0.1', `localhost:${upstreamPort}`)).toMatch(/^403 berth egress: localhost is not in the agent's egress hosts/);
  });

  it('refuses a source address that is no sandbox', async () => {
    policyOfA = { hosts: ['localhost'], cidrs: ['127.0.0.1/32'], credentials: [] };
    const before = { ...counted };
    expect(await connectFrom('127.0.0.2', `localhost:${upstreamPort}`)).toBe('403 berth egress: 127.0.0.2 is not a sandbox with an egress policy; nothing may be reached');
    expect(counted.unknownSources - before.unknownSources).toBe(1);
    expect(counted.denied - before.denied).toBe(1);
  });

  it('refuses, and keeps serving, when the policy cannot be read', async () => {
    expect(await connectFrom('127.0.0.3', `localhost:${upstreamPort}`)).toBe("502 berth egress: the sandbox's policy could not be read (the database is away)");
    policyOfA = { hosts: ['localhost'], cidrs: ['127.0.0.1/32'], credentials: [] };
    expect(typeof (await connectFrom('127.0.0.1', `localhost:${upstreamPort}`))).not.toBe('string');
  });

  it("adds a bound credential over TLS terminated with the sandbox's CA", async () => {
    policyOfA = { hosts: ['localhost'], cidrs: ['127.0.0.1/32'], credentials: [{ host: 'localhost', header: 'Authorization', value: 'Bearer the-secret' }] };
    const tunnel = await connectFrom('127.0.0.1', `localhost:${upstreamPort}`);
    // The sandbox trusts its own CA, which signed the certificate the gateway answers with.
    expect(await get(tunnel as Socket, sandboxCa.certificatePem)).toBe('authorization: Bearer the-secret');
    expect(counted.injected).toBe(1);
  });
});
