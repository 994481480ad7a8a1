import { randomBytes } from 'node:crypto';

/**
 * Kind prefixes from the spec, plus `org_`, `key_`, `sis_` (sign-in sessions), `aud_` (audit entries),
 * `kcol_`, `ksrc_` (knowledge collections and sources) and `mcp_` (MCP servers) for our own records.
 */
export type IdPrefix =
  | 'ses' | 'agt' | 'snap' | 'adef' | 'sched' | 'trg' | 'ch' | 'wf' | 'wfr' | 'flt' | 'itm'
  | 'conv' | 'msg' | 'job' | 'exec' | 'task' | 'req' | 'evt' | 'del' | 'wh' | 'mem' | 'cur' | 'usr' | 'org' | 'key' | 'sis' | 'aud' | 'apr'
  | 'kcol' | 'ksrc' | 'mcp' | 'wpl' | 'wsb';

// Crockford base32 in lowercase: ids are valid Kubernetes object names once `_` becomes `-`.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * `<prefix>_<26 chars>`: 10 characters of millisecond time, then 16 random ones (80 bits),
 * so ids sort by creation time and listing by id gives a stable, chronological order.
 */
export function newId(prefix: IdPrefix, now: Date = new Date()): string {
  let time = now.getTime();
  let timePart = '';
  for (let i = 0; i < 10; i++) {
    timePart = ALPHABET[time % 32] + timePart;
    time = Math.floor(time / 32);
  }
  const random = randomBytes(16);
  let randomPart = '';
  for (const byte of random) randomPart += ALPHABET[byte % 32];
  return `${prefix}_${timePart}${randomPart}`;
}

const ID_PATTERN = /^[a-z]+_[0-9a-z]+$/;

export function isId(value: string, prefix: IdPrefix): boolean {
  return value.startsWith(`${prefix}_`) && ID_PATTERN.test(value) && value.length <= 64;
}

/** Kubernetes object names cannot hold `_`: `agt_01h…` is stored as `agt-01h…`. */
export function idToObjectName(id: string): string {
  return id.replace('_', '-');
}

export function objectNameToId(name: string): string {
  return name.replace('-', '_');
}
