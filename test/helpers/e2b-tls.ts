import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { createServer, type Server } from 'node:tls';
import { Agent, buildConnector, getGlobalDispatcher, setGlobalDispatcher, type Dispatcher } from 'undici';
import { tempDir } from './berth.js';

/**
 * What an install with wildcard DNS and TLS gives SDKs that only know `E2B_DOMAIN`
 * (`https://api.<domain>`, `https://<port>-<sandboxId>.<domain>`): a TLS terminator in front of
 * a `berth up` (an Ingress's part) with a certificate for `*.<domain>`, and this process's
 * fetch resolving every `*.<domain>` to it (the wildcard DNS record's part).
 */
export interface WildcardFront {
  close(): Promise<void>;
}

export async function startWildcardFront(domain: string, berthUrl: string): Promise<WildcardFront> {
  const dir = tempDir('berth-e2b-tls-');
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-keyout', key, '-out', cert, '-subj', `/CN=${domain}`, '-addext', `subjectAltName=DNS:*.${domain},DNS:${domain}`,
  ], { stdio: 'ignore' });
  const target = new URL(berthUrl);
  const server: Server = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (socket) => {
    const upstream = netConnect(Number(target.port), target.hostname);
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  const tls = buildConnector({ ca: readFileSync(cert) });
  const plain = buildConnector({});
  const previous: Dispatcher = getGlobalDispatcher();
  setGlobalDispatcher(
    new Agent({
      connect: (options, callback) => {
        if (options.hostname === domain || options.hostname.endsWith(`.${domain}`)) {
          tls({ ...options, hostname: '127.0.0.1', port: String(port), servername: options.hostname }, callback);
        } else plain(options, callback);
      },
    }),
  );
  return {
    async close() {
      setGlobalDispatcher(previous);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
