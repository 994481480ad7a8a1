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
