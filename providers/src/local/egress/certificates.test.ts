import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { createCertificateAuthority, issueServerCertificate, newServerKey } from './certificates.js';

describe('egress certificates', () => {
  it('makes a CA whose server certificates verify for their host', () => {
    const ca = createCertificateAuthority('berth sandbox agt_1');
    const caCert = new X509Certificate(ca.certificatePem);
    expect(caCert.ca).toBe(true);
    expect(caCert.verify(caCert.publicKey)).toBe(true);
    const leaf = issueServerCertificate(ca, 'api.github.com', newServerKey());
    const cert = new X509Certificate(leaf.certificatePem);
    expect(cert.ca).toBe(false);
    expect(cert.checkIssued(caCert)).toBe(true);
    expect(cert.verify(caCert.publicKey)).toBe(true);
    expect(cert.checkHost('api.github.com')).toBe('api.github.com');
    expect(cert.checkHost('other.github.com')).toBeUndefined();
    const byAddress = new X509Certificate(issueServerCertificate(ca, '127.0.0.1', newServerKey()).certificatePem);
    expect(byAddress.checkIP('127.0.0.1')).toBe('127.0.0.1');
    const byV6 = new X509Certificate(issueServerCertificate(ca, '2001:db8::1', newServerKey()).certificatePem);
    expect(byV6.checkIP('2001:db8::1')).toBe('2001:db8::1');
  });

  it('passes OpenSSL verification in a real TLS handshake', async () => {
    const ca = createCertificateAuthority('test');
    const leaf = issueServerCertificate(ca, 'localhost', newServerKey());
    const server = createServer({ cert: leaf.certificatePem, key: leaf.keyPem }, (_req, res) => res.end('ok'));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const port = (server.address() as AddressInfo).port;
      const socket = connect({ host: '127.0.0.1', port, servername: 'localhost', ca: ca.certificatePem });
      await once(socket, 'secureConnect');
      expect(socket.authorized).toBe(true);
      socket.destroy();
      const other = connect({ host: '127.0.0.1', port, servername: 'localhost', ca: createCertificateAuthority('other').certificatePem });
      const [error] = (await once(other, 'error')) as [NodeJS.ErrnoException];
      expect(error.code).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    } finally {
      server.close();
    }
  });
});
