import { lookup as dnsLookup, Resolver } from 'node:dns/promises';
import { createServer as createHttpServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { BlockList, connect, isIP, type AddressInfo, type LookupFunction, type Socket } from 'node:net';
import { createSecureContext, TLSSocket, type SecureContext } from 'node:tls';
import type { KeyObject } from 'node:crypto';
import { egressHostMatches } from '@berth/crds';
import { isPrivateAddress, type EgressMetrics, type Logger, type SandboxEgress } from '@berth/common';
import { issueServerCertificate, newServerKey, type CertificateAuthority } from './certificates.js';

/**
 * The egress proxy (ADR 46): the only way out of a sandbox. Which sandbox asks is known by where
 * the connection came from, never by anything the sandbox sends, so no sandbox can claim another's
 * policy. Two fronts share everything after that:
 * - `listen`: a local sandbox's own listener, a unix socket in its directory that its relay
 *   (egress-relay.py) carries its loopback connections to; the socket names the sandbox.
 * - `listenGateway`: one TCP listener for the sandbox pods of a cluster (ADR 52); the connection's
 *   source address names the pod, and `identify` gives its agent, policy and CA as they are now.
 *
 * It speaks HTTP proxy: `CONNECT host:port` opens a tunnel, and a request with an absolute
 * `http://` URL is forwarded. Each is decided by the sandbox's current policy: the host must match
 * `hosts` (a name) or lie in `cidrs` (an address), and a name must resolve to a public address or
 * one inside `cidrs`; the proxy resolves names itself, so the sandbox needs no DNS. A refusal is
 * answered `403` with the reason in the status line (what curl and Python's clients print) and
 * body. A tunnel to a host that has a credential bound to it is not passed through: the proxy
 * answers the TLS handshake with a certificate for the host from the sandbox's own CA, reads the
 * requests, sets the bound headers and sends each on over a new TLS connection to the host,
 * verified against the system's CAs (and `trustedCas`). Everything else is passed through as
 * bytes, its TLS end to end.
 */
export interface EgressProxyOptions {
  log: Logger;
  metrics?: EgressMetrics;
  /** PEM certificates the proxy trusts for hosts it connects to itself (after credential injection); default the system's. */
  trustedCas?: string[];
  /** DNS servers (`address` or `address:port`) names are resolved with; default the host's resolver (getaddrinfo). */
  dnsServers?: string[];
}

/** A listener and its connections, tunnels and intercepted ones included. */
interface Front {
  server: Server;
  /** The HTTP server forgets a socket once CONNECT takes it over, and would wait for it for ever when the listener closes. */
  sockets: Set<Socket>;
}

/** A sandbox's CA, the key of its leaf certificates, and those certificates by host. */
interface Authority {
  ca: CertificateAuthority;
  key: KeyObject;
  contexts: Map<string, SecureContext>;
}

/** The sandbox a connection comes from (its agent id), its policy and CA brought up to date; undefined for none. */
type Identify = (socket: Socket) => Promise<string | undefined>;

/** What a gateway's `identify` answers for the source address of a connection. */
export interface GatewaySandbox {
  agentId: string;
  egress: SandboxEgress;
  ca: CertificateAuthority;
}

/** Authorities a gateway keeps at most (the least recently used go first): one per sandbox that used it. */
const GATEWAY_AUTHORITIES = 4096;

/** A decided destination: where to connect, and what was asked. */
interface Destination {
  host: string;
  port: number;
  address: string;
}

class Refusal extends Error {
  constructor(
    readonly status: 403 | 400 | 502,
    message: string,
  ) {
    super(message);
  }
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'upgrade']);

export class EgressProxy {
  private readonly listeners = new Map<string, Front>();
  private readonly gateways = new Set<Front>();
  private readonly policies = new Map<string, SandboxEgress>();
  private readonly authorities = new Map<string, Authority>();
  /** The terminated TLS connections' HTTP server; which sandbox and host each came for is in `intercepted`. */
  private readonly interceptor: Server;
  private readonly intercepted = new WeakMap<Socket, { identify: Identify; raw: Socket; host: string; port: number }>();
  private readonly upstreamAgent: HttpsAgent;
  private readonly resolve: (host: string) => Promise<string[]>;

  constructor(private readonly options: EgressProxyOptions) {
    this.resolve = options.dnsServers?.length ? resolverOf(options.dnsServers) : async (host) => (await dnsLookup(host, { all: true })).map((entry) => entry.address);
    this.upstreamAgent = new HttpsAgent({ keepAlive: true, ...(options.trustedCas ? { ca: options.trustedCas } : {}) });
    this.interceptor = createHttpServer((req, res) => void this.forwardIntercepted(req, res));
  }

  /** Starts the sandbox's listener on `socketPath`, with its CA; a second call for a listening sandbox does nothing. */
  async listen(agentId: string, socketPath: string, ca: CertificateAuthority): Promise<void> {
    if (this.listeners.has(agentId)) return;
    const front = this.front(async () => agentId);
    this.authorities.set(agentId, { ca, key: newServerKey(), contexts: new Map() });
    this.listeners.set(agentId, front);
    try {
      await listening(front.server, (ready) => front.server.listen(socketPath, ready));
    } catch (error) {
      this.listeners.delete(agentId);
      this.authorities.delete(agentId);
      throw error;
    }
  }

  /**
   * Starts a listener for many sandboxes on `port` (ADR 52): each connection is answered for the
   * sandbox `identify` names by the connection's source address, with the policy and CA it gives,
   * asked again for each tunnel and request. An address it does not know is refused. Resolves to
   * the port listened on.
   */
  async listenGateway(options: { port: number; host?: string; identify: (address: string) => Promise<GatewaySandbox | undefined> }): Promise<number> {
    const front = this.front(async (socket) => {
      const sandbox = socket.remoteAddress === undefined ? undefined : await options.identify(socket.remoteAddress);
      if (!sandbox) return undefined;
      this.policies.set(sandbox.agentId, sandbox.egress);
      this.keepAuthority(sandbox.agentId, sandbox.ca);
      return sandbox.agentId;
    });
    this.gateways.add(front);
    await listening(front.server, (ready) => front.server.listen(options.port, options.host, ready));
    return (front.server.address() as AddressInfo).port;
  }

  /** An HTTP proxy server whose connections are answered for the sandbox `identify` names. */
  private front(identify: Identify): Front {
    const server = createHttpServer((req, res) => void this.forwardPlain(identify, req, res));
    server.on('connect', (req: IncomingMessage, socket: Socket, head: Buffer) => void this.tunnel(identify, req, socket, head));
    server.on('clientError', (_error, socket: Socket) => socket.destroy());
    // Listening does not keep Berth running: it stops when its own work has.
    server.unref();
    const front: Front = { server, sockets: new Set() };
    server.on('connection', (socket: Socket) => {
      front.sockets.add(socket);
      socket.once('close', () => front.sockets.delete(socket));
    });
    return front;
  }

  /** The sandbox's authority, made anew when its CA changed; the least recently used beyond GATEWAY_AUTHORITIES are dropped. */
  private keepAuthority(agentId: string, ca: CertificateAuthority): void {
    const kept = this.authorities.get(agentId);
    this.authorities.delete(agentId);
    this.authorities.set(agentId, kept && kept.ca.certificatePem === ca.certificatePem ? kept : { ca, key: newServerKey(), contexts: new Map() });
    for (const oldest of this.authorities.keys()) {
      if (this.authorities.size <= GATEWAY_AUTHORITIES) break;
      // A sandbox's own listener keeps its authority until it closes.
      if (this.listeners.has(oldest)) continue;
      this.authorities.delete(oldest);
      this.policies.delete(oldest);
    }
  }

  isListening(agentId: string): boolean {
    return this.listeners.has(agentId);
  }

  /** The sandbox's policy from now on: connections already open stay, requests in an intercepted one are decided again. */
  setPolicy(agentId: string, egress: SandboxEgress): void {
    this.policies.set(agentId, egress);
  }

  policy(agentId: string): SandboxEgress | undefined {
    return this.policies.get(agentId);
  }

  async close(agentId: string): Promise<void> {
    const listener = this.listeners.get(agentId);
    this.listeners.delete(agentId);
    this.policies.delete(agentId);
    this.authorities.delete(agentId);
    if (listener) await closeFront(listener);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.listeners.keys()].map((agentId) => this.close(agentId)));
    await Promise.all([...this.gateways].map(closeFront));
    this.gateways.clear();
    this.upstreamAgent.destroy();
  }

  /** Where `host:port` may be reached from this sandbox, or a Refusal saying why not. */
  private async decide(agentId: string, host: string, port: number): Promise<Destination> {
    const egress = this.policies.get(agentId);
    if (!egress) throw new Refusal(403, `berth egress: this sandbox has no egress policy; nothing may be reached`);
    const networks = blockListOf(egress.cidrs);
    const family = isIP(host);
    if (family !== 0) {
      if (!networks.check(host, family === 4 ? 'ipv4' : 'ipv6')) throw new Refusal(403, `berth egress: ${host} is not in the agent's egress cidrs`);
      return { host, port, address: host };
    }
    if (!egress.hosts.some((pattern) => egressHostMatches(pattern, host))) {
      throw new Refusal(403, `berth egress: ${host} is not in the agent's egress hosts`);
    }
    let addresses: string[];
    try {
      addresses = await this.resolve(host);
    } catch (error) {
      throw new Refusal(502, `berth egress: ${host} could not be resolved (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    const inNetworks = (address: string) => networks.check(address, isIP(address) === 4 ? 'ipv4' : 'ipv6');
    const address = addresses.find((candidate) => inNetworks(candidate) || !isPrivateAddress(candidate));
    if (address === undefined) {
      throw new Refusal(403, `berth egress: ${host} resolves to ${addresses.join(', ')}, a private address not in the agent's egress cidrs`);
    }
    return { host, port, address };
  }

  private credentialsFor(agentId: string, host: string): SandboxEgress['credentials'] {
    return (this.policies.get(agentId)?.credentials ?? []).filter((credential) => egressHostMatches(credential.host, host));
  }

  /** The sandbox a connection comes from, or a Refusal: a source no sandbox has may reach nothing. */
  private async identified(identify: Identify, socket: Socket): Promise<string> {
    let agentId: string | undefined;
    try {
      agentId = await identify(socket);
    } catch (error) {
      // The policy or the CA could not be read (the API server, the database): nothing goes out meanwhile.
      throw new Refusal(502, `berth egress: the sandbox's policy could not be read (${(error as Error).message})`);
    }
    if (agentId === undefined) {
      this.options.metrics?.unknownSources.inc();
      throw new Refusal(403, `berth egress: ${socket.remoteAddress ?? 'this source'} is not a sandbox with an egress policy; nothing may be reached`);
    }
    return agentId;
  }

  private count(decision: 'allowed' | 'denied', kind: 'connect' | 'http'): void {
    this.options.metrics?.requests.inc({ decision, kind });
  }

  private async tunnel(identify: Identify, req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    const target = parseAuthority(req.url ?? '');
    let agentId: string | undefined;
    let destination: Destination;
    try {
      agentId = await this.identified(identify, socket);
      if (!target) throw new Refusal(400, `berth egress: CONNECT needs host:port, not "${req.url ?? ''}"`);
      destination = await this.decide(agentId, target.host, target.port);
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      if (error.status === 403) this.count('denied', 'connect');
      this.options.log.info({ agentId, target: req.url, reason: error.message }, 'egress refused');
      return refuseRaw(socket, error);
    }
    this.count('allowed', 'connect');
    if (this.credentialsFor(agentId, destination.host).length > 0 && isIP(destination.host) === 0) {
      return this.intercept(identify, agentId, destination, socket, head);
    }
    const upstream = connect({ host: destination.address, port: destination.port });
    upstream.setNoDelay(true);
    upstream.once('connect', () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      socket.pipe(upstream).pipe(socket);
    });
    upstream.once('error', (error) => {
      if (upstream.connecting) return refuseRaw(socket, new Refusal(502, `berth egress: cannot connect to ${req.url}: ${error.message}`));
      socket.destroy();
    });
    socket.once('close', () => upstream.destroy());
  }

  /** Answers the tunnel's TLS as the host, with a certificate of the sandbox's CA; its requests go to `forwardIntercepted`. */
  private intercept(identify: Identify, agentId: string, destination: Destination, socket: Socket, head: Buffer): void {
    const authority = this.authorities.get(agentId);
    if (!authority) return void socket.destroy();
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) socket.unshift(head);
    const secure = new TLSSocket(socket, { isServer: true, secureContext: contextFor(authority, destination.host), ALPNProtocols: ['http/1.1'] });
    secure.on('error', () => secure.destroy());
    this.intercepted.set(secure, { identify, raw: socket, host: destination.host, port: destination.port });
    this.interceptor.emit('connection', secure);
  }

  /** A request inside an intercepted tunnel: decided again (the policy may have changed), its credentials set, sent on over TLS. */
  private async forwardIntercepted(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const origin = this.intercepted.get(req.socket);
    if (!origin) return refuse(res, new Refusal(400, 'berth egress: unknown connection'));
    let agentId: string;
    let destination: Destination;
    try {
      agentId = await this.identified(origin.identify, origin.raw);
      destination = await this.decide(agentId, origin.host, origin.port);
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      if (error.status === 403) this.count('denied', 'http');
      return refuse(res, error);
    }
    const headers = withoutHopByHop(req.headers);
    for (const credential of this.credentialsFor(agentId, destination.host)) {
      headers[credential.header.toLowerCase()] = credential.value;
      this.options.metrics?.injected.inc();
    }
    const upstream = httpsRequest({
      host: destination.host,
      port: destination.port,
      method: req.method,
      path: req.url,
      headers,
      agent: this.upstreamAgent,
      lookup: fixedLookup(destination.address),
    });
    this.relayExchange(req, res, upstream, destination);
  }

  /** A plain-HTTP request (`GET http://host/path`): decided and forwarded. Never gets credentials: they would travel in clear. */
  private async forwardPlain(identify: Identify, req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    let destination: Destination;
    try {
      const agentId = await this.identified(identify, req.socket);
      url = parseAbsoluteHttpUrl(req.url ?? '');
      destination = await this.decide(agentId, hostOf(url), Number(url.port || 80));
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      if (error.status === 403) this.count('denied', 'http');
      return refuse(res, error);
    }
    this.count('allowed', 'http');
    const upstream = httpRequest({
      host: destination.host,
      port: destination.port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers: withoutHopByHop(req.headers),
      lookup: fixedLookup(destination.address),
    });
    this.relayExchange(req, res, upstream, destination);
  }

  private relayExchange(req: IncomingMessage, res: ServerResponse, upstream: ReturnType<typeof httpRequest>, destination: Destination): void {
    upstream.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, withoutHopByHop(answer.headers));
      answer.pipe(res);
    });
    upstream.on('error', (error) => {
      if (res.headersSent) return void res.destroy();
      refuse(res, new Refusal(502, `berth egress: ${destination.host}:${destination.port}: ${error.message}`));
    });
    req.pipe(upstream);
  }
}

/** The TLS context for `host` with a certificate of the sandbox's CA, made once per host. */
function contextFor(authority: Authority, host: string): SecureContext {
  let context = authority.contexts.get(host);
  if (!context) {
    const issued = issueServerCertificate(authority.ca, host, authority.key);
    context = createSecureContext({ cert: issued.certificatePem + authority.ca.certificatePem, key: issued.keyPem });
    authority.contexts.set(host, context);
  }
  return context;
}

/** Listens (`start` given the callback for success) and resolves then, or rejects with the listener's error. */
function listening(server: Server, start: (ready: () => void) => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    start(() => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function closeFront(front: Front): Promise<void> {
  front.server.closeAllConnections();
  for (const socket of front.sockets) socket.destroy();
  await new Promise<void>((resolve) => front.server.close(() => resolve()));
}

/** Resolves a name's IPv4 and IPv6 addresses with these servers; fails only when it has neither. */
function resolverOf(servers: string[]): (host: string) => Promise<string[]> {
  const resolver = new Resolver();
  resolver.setServers(servers);
  return async (host) => {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const addresses = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
    if (addresses.length === 0) throw v4.status === 'rejected' ? v4.reason : new Error('no addresses');
    return addresses;
  };
}

function blockListOf(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [address = '', prefix = ''] = cidr.split('/');
    list.addSubnet(address, Number(prefix), isIP(address) === 6 ? 'ipv6' : 'ipv4');
  }
  return list;
}

/** `host:port` of a CONNECT (`[v6]:port` for IPv6), the host lowercased. */
export function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(authority);
  if (!match) return undefined;
  const port = Number(match[3]);
  if (port < 1 || port > 65535) return undefined;
  return { host: (match[1] ?? match[2]!).toLowerCase(), port };
}

function parseAbsoluteHttpUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Refusal(400, `berth egress: a proxy request needs an absolute http:// URL, not "${text.slice(0, 200)}"`);
  }
  if (url.protocol !== 'http:') throw new Refusal(400, `berth egress: only http:// URLs are forwarded; use CONNECT for ${url.protocol}`);
  return url;
}

function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
}

function withoutHopByHop(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) kept[name] = value;
  }
  return kept;
}

/** A lookup that answers the address the policy decided on, so that the connection goes where it was allowed to. */
function fixedLookup(address: string): LookupFunction {
  const family = isIP(address);
  return ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as LookupFunction;
}

/** A refusal on a raw socket (before a tunnel): the reason as status line and body, then the end. */
function refuseRaw(socket: Socket, refusal: Refusal): void {
  if (socket.destroyed) return;
  const body = `${refusal.message}\n`;
  socket.end(
    `HTTP/1.1 ${refusal.status} ${statusLine(refusal.message)}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
      `X-Berth-Egress: ${refusal.status === 403 ? 'denied' : 'error'}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function refuse(res: ServerResponse, refusal: Refusal): void {
  if (res.headersSent) return void res.destroy();
  const body = `${refusal.message}\n`;
  res.writeHead(refusal.status, statusLine(refusal.message), {
    'content-type': 'text/plain; charset=utf-8',
    'x-berth-egress': refusal.status === 403 ? 'denied' : 'error',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** The reason as a status line may carry it: printable ASCII, no line breaks. */
function statusLine(message: string): string {
  return message.replace(/[^\x20-\x7e]/g, '?').slice(0, 200);
}
