import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { createCertificateAuthority, type CertificateAuthority } from './certificates.js';

/**
 * What a local sandbox holds of the egress path (ADR 46): the folder mounted read-only at
 * EGRESS_MOUNT (the proxy's unix socket, the sandbox's CA certificate and a CA bundle with it),
 * the relay (which the launcher starts at the first connection to its port, ADR 49), and the
 * environment that points clients at both.
 */

/** Where the sandbox sees its egress folder. */
export const EGRESS_MOUNT = '/run/berth/egress';
/** The sandbox's loopback port of the relay (egress-relay.py). */
export const EGRESS_PORT = 3128;
export const EGRESS_SOCKET = 'proxy.sock';
/** The sandbox's CA certificate, and the system's CAs with it, in the egress folder. */
export const CA_FILE = 'ca.pem';
export const BUNDLE_FILE = 'ca-bundle.pem';

/**
 * The environment of a sandbox with the egress folder: proxy variables in both spellings (curl
 * reads lowercase http_proxy only), loopback kept direct, and the CA bundle (the system's CAs and
 * the sandbox's own) where OpenSSL, Python's requests, curl, git, Go and Node.js look for one.
 * `proxy` is the relay on the sandbox's loopback, or a pod's egress gateway (ADR 52).
 */
export function egressEnv(proxy = `http://127.0.0.1:${EGRESS_PORT}`): Record<string, string> {
  const bundle = `${EGRESS_MOUNT}/${BUNDLE_FILE}`;
  return {
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    NO_PROXY: 'localhost,127.0.0.1,::1',
    no_proxy: 'localhost,127.0.0.1,::1',
    SSL_CERT_FILE: bundle,
    REQUESTS_CA_BUNDLE: bundle,
    CURL_CA_BUNDLE: bundle,
    GIT_SSL_CAINFO: bundle,
    NODE_EXTRA_CA_CERTS: `${EGRESS_MOUNT}/${CA_FILE}`,
  };
}

/**
 * Makes the sandbox's egress folder under `root` and its CA: the one already there (a sandbox
 * adopted after a restart, or restored on this host, keeps trusting the CA it started with), or a
 * new one. The key stays in `root`, outside the mounted folder.
 */
export async function prepareEgressFolder(root: string, agentId: string): Promise<{ dir: string; socket: string; ca: CertificateAuthority }> {
  const dir = join(root, 'egress');
  const keptCa = join(root, 'egress-ca.json');
  await mkdir(dir, { recursive: true, mode: 0o755 });
  let ca: CertificateAuthority;
  if (existsSync(keptCa)) ca = JSON.parse(await readFile(keptCa, 'utf8')) as CertificateAuthority;
  else {
    ca = createCertificateAuthority(`Berth sandbox ${agentId}`);
    await writeFile(keptCa, JSON.stringify(ca), { mode: 0o600 });
  }
  await writeFile(join(dir, CA_FILE), ca.certificatePem, { mode: 0o644 });
  await writeFile(join(dir, BUNDLE_FILE), caBundle(ca), { mode: 0o644 });
  return { dir, socket: join(dir, EGRESS_SOCKET), ca };
}

/** The CA bundle a sandbox trusts: the system's CAs and its own. */
export function caBundle(ca: CertificateAuthority): string {
  return [...rootCertificates, ca.certificatePem].join('\n');
}
