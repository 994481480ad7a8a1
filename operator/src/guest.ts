import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The programs that run inside sandboxes (the launcher and its client, the file tools, the
 * browser driver) are files of their own in `sandbox-images/guest/`, linted and tested there.
 * This module finds them: the same two levels up from `operator/src` and `operator/dist`.
 */
export const GUEST_DIR = fileURLToPath(new URL('../../sandbox-images/guest/', import.meta.url)).replace(/\/$/, '');

const sources = new Map<string, string>();

/** The text of a guest program, read once: it is sent to sandboxes with every call. */
export function guestSource(name: string): string {
  let source = sources.get(name);
  if (source === undefined) {
    source = readFileSync(`${GUEST_DIR}/${name}`, 'utf8');
    sources.set(name, source);
  }
  return source;
}

/**
 * The one record a guest program answers with: the JSON text's length in bytes (decimal), a
 * newline, then the JSON, and nothing after it. Returns the parsed value, or undefined when `data`
 * is not exactly one whole record (nothing written, cut short, or something else around it).
 */
export function parseRecord(data: Buffer | string): unknown {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const newline = bytes.indexOf(0x0a);
  if (newline < 1 || newline > 12) return undefined;
  const header = bytes.subarray(0, newline).toString('latin1');
  if (!/^\d+$/.test(header)) return undefined;
  const body = bytes.subarray(newline + 1);
  if (body.length !== Number(header)) return undefined;
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}
