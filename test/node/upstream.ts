import { expect } from 'vitest';
import { issueServerCertificate, newServerKey } from '../../providers/src/local/index.js';
import type { CertificateAuthority } from '../../providers/src/local/egress/certificates.js';
import { kubectl, kubectlJson } from '../cluster-tier/helpers.js';
import { serverPodManifest } from './sandbox-images.js';

/**
 * The outside for the node tier's egress tests: a plain pod (no sandbox label, under gVisor like
 * every pod here) serving HTTPS as two names on two ports, with certificates of the test's CA. It
 * checks the credential itself and never echoes it. A pod, not a host process, so that a sandbox's
 * direct connection to it crosses the bridge, where the NetworkPolicies hold.
 */
export const UPSTREAM_PORTS = { 'allowed.egress.test': 8443, 'other.egress.test': 8444 } as const;

const SERVER = [
  'import http.server, os, ssl, threading',
  'class Answer(http.server.BaseHTTPRequestHandler):',
  '    def do_GET(self):',
  "        authorized = self.headers.get('Authorization') == 'Bearer ' + os.environ['TOKEN']",
  "        body = ('%s %s' % (self.server.name, 'authorized' if authorized else 'anonymous')).encode()",
  '        self.send_response(200)',
  "        self.send_header('Content-Length', str(len(body)))",
  '        self.end_headers()',
  '        self.wfile.write(body)',
  'def serve(name, port, variable):',
  "    path = '/tmp/%d.pem' % port",
  "    open(path, 'w').write(os.environ[variable])",
  "    server = http.server.ThreadingHTTPServer(('0.0.0.0', port), Answer)",
  '    server.name = name',
  '    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)',
  '    context.load_cert_chain(path)',
  '    server.socket = context.wrap_socket(server.socket, server_side=True)',
  '    threading.Thread(target=server.serve_forever).start()',
  ...Object.entries(UPSTREAM_PORTS).map(([name, port]) => `serve('${name}', ${port}, 'PEM_${port}')`),
].join('\n');

/** Starts the upstream pod `upstream` in `namespace`, Ready; answers its pod IP. */
export async function startUpstreamPod(namespace: string, ca: CertificateAuthority, token: string): Promise<string> {
  const pems = Object.entries(UPSTREAM_PORTS).map(([name, port]) => {
    const issued = issueServerCertificate(ca, name, newServerKey());
    return { name: `PEM_${port}`, value: issued.certificatePem + issued.keyPem };
  });
  const manifest = serverPodManifest({
    name: 'upstream',
    labels: { app: 'upstream' },
    command: ['python3', '-c', SERVER],
    env: [{ name: 'TOKEN', value: token }, ...pems],
    readyPort: UPSTREAM_PORTS['other.egress.test'],
  });
  const applied = await kubectl(['apply', '-n', namespace, '-f', '-'], manifest);
  expect(applied.code, applied.stderr).toBe(0);
  const ready = await kubectl(['wait', '-n', namespace, '--for=condition=Ready', '--timeout=120s', 'pod/upstream']);
  expect(ready.code, ready.stderr).toBe(0);
  return (await kubectlJson(['get', 'pod', 'upstream', '-n', namespace])).status.podIP as string;
}

/** Connects straight to host:port from a sandbox, without the proxy; exits non-zero when it cannot. */
export const DIRECT_CONNECT = ['import socket, sys', 's = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)', 'print("connected")'].join('\n');
