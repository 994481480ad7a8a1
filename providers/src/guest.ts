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

/** A guest tool program's answer: its result, or why the tool failed (for the model to read). */
export type GuestAnswer = { ok: true; result: unknown } | { ok: false; error: string };

/**
 * The code that runs the guest program `name` (a `.py` or `.mjs` file) with `request`: the program,
 * after one line that sets `BERTH_REQUEST` to the request's JSON as a string literal (a JSON
 * string is a valid Python and JavaScript string literal, so no argument is ever spliced into code).
 */
export function guestCode(name: string, request: unknown): string {
  const literal = JSON.stringify(JSON.stringify(request));
  const prelude = name.endsWith('.py') ? `BERTH_REQUEST = ${literal}\n` : `globalThis.BERTH_REQUEST = ${literal};\n`;
  return prelude + guestSource(name);
}

/** The answer record a guest tool program wrote as its whole stdout, or undefined when there is none. */
export function parseAnswer(stdout: string): GuestAnswer | undefined {
  const value = parseRecord(stdout) as { ok?: unknown; result?: unknown; error?: unknown } | undefined;
  if (typeof value !== 'object' || value === null) return undefined;
  if (value.ok === true && 'result' in value) return { ok: true, result: value.result };
  if (value.ok === false && typeof value.error === 'string') return { ok: false, error: value.error };
  return undefined;
}
