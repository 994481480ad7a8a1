// Loaded into the `berth up` process of the fuzz tier (NODE_OPTIONS=--import): every outgoing
// connection to anything but this machine fails at once, as if refused. Fuzzed webhook URLs,
// BYOI endpoints and model base URLs are then harmless (names other than localhost do not even
// resolve), and a test that would reach the
// internet shows up as a refused connection in the server's log instead of leaving the host.
import dns from 'node:dns';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';

const LOCAL = /^(localhost|127(\.\d{1,3}){3}|::1|::ffff:127(\.\d{1,3}){3})$/i;

function destination(args) {
  const [first, second] = args;
  if (Array.isArray(first)) return destination(first); // the internal normalized form
  if (first && typeof first === 'object') return first.path ? { path: first.path } : { host: first.host ?? 'localhost' };
  if (typeof first === 'string' && !/^\d+$/.test(first)) return { path: first };
  return { host: typeof second === 'string' ? second : 'localhost' };
}

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function guardedConnect(...args) {
  const target = destination(args);
  if (target.path !== undefined || LOCAL.test(String(target.host).replace(/^\[|\]$/g, ''))) return connect.apply(this, args);
  const error = Object.assign(new Error(`fuzz tier: connection to ${target.host} refused (this process may only reach this machine)`), {
    code: 'ECONNREFUSED',
  });
  process.nextTick(() => this.destroy(error));
  return this;
};

const notFound = (hostname) =>
  Object.assign(new Error(`fuzz tier: ${hostname} not resolved (this process may only reach this machine)`), { code: 'ENOTFOUND', hostname });
const lookup = dns.lookup;
dns.lookup = function guardedLookup(hostname, options, callback) {
  if (LOCAL.test(String(hostname)) || net.isIP(String(hostname)) !== 0) return lookup.call(this, hostname, options, callback);
  const done = typeof options === 'function' ? options : callback;
  process.nextTick(() => done(notFound(hostname)));
  return {};
};
const promisesLookup = dns.promises.lookup;
dns.promises.lookup = async function guardedPromisesLookup(hostname, options) {
  if (LOCAL.test(String(hostname)) || net.isIP(String(hostname)) !== 0) return promisesLookup.call(this, hostname, options);
  throw notFound(hostname);
};
// `import { lookup } from 'node:dns'` binds the ESM export: bring it in line with the patch.
syncBuiltinESMExports();
