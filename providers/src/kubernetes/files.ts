/**
 * A pod's files and ports through the exec API (ADR 40): `pod-files.sh` (a guest program) run with `sh -c`
 * for each operation, bodies as the exec's stdin and stdout. Paths are resolved and confined to
 * the workspace inside the pod. An upload is received into a hidden file and renamed into place by
 * a second exec once the body ended whole (an exec's stdin ending says nothing of why it ended).
 */

import { randomBytes } from 'node:crypto';
import { Duplex, PassThrough, Writable, type Readable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import type { SandboxRef } from '@berth/crds';
import { PortClosedError, ProviderError, SandboxFileError, WORKSPACE_ROOT, type FileErrorCode, type FileInfo, type SandboxFiles } from '@berth/common';
import { guestSource } from '../guest.js';
import { streamInPod } from './exec.js';

/** How long a file operation may take (a body's transfer included). */
const FILE_EXEC_MS = 60 * 60 * 1000;
const MAX_LIST_ENTRIES = 5000;
/** pod-files.sh's exit statuses. */
const EXIT_CODES: Record<number, FileErrorCode> = { 3: 'outside', 4: 'not_found', 5: 'exists', 6: 'not_directory', 7: 'is_directory', 8: 'not_empty', 9: 'io_error', 10: 'bad_request' };
const TYPES: Record<string, FileInfo['type']> = { f: 'file', d: 'directory', l: 'symlink' };
const FIELDS = 6;

type Target = { namespace: string; pod: string; container: string };

/** Entries from pod-files.sh's NUL-terminated fields (paths `./…` relative to the workspace). */
export function parseEntries(data: Buffer): FileInfo[] {
  const fields = data.toString('utf8').split('\0');
  const entries: FileInfo[] = [];
  for (let i = 0; i + FIELDS <= fields.length; i += FIELDS) {
    const [type, size, mode, mtime, relative, target] = fields.slice(i, i + FIELDS) as [string, string, string, string, string, string];
    const path = `${WORKSPACE_ROOT}${relative.slice(1)}`;
    entries.push({
      name: path.slice(path.lastIndexOf('/') + 1),
      path,
      type: TYPES[type] ?? 'other',
      size: Number(size),
      mode: parseInt(mode, 8),
      modifiedAt: new Date(Math.floor(Number(mtime) * 1000)).toISOString(),
      ...(type === 'l' ? { target } : {}),
    });
  }
  return entries;
}

class Collect extends Writable {
  readonly chunks: Buffer[] = [];
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.chunks.push(chunk);
    done();
  }
}

export function podFiles(provider: string, kubeConfig: KubeConfig, targetOf: (ref: SandboxRef) => Target): SandboxFiles {
  const command = (args: string[]) => ['sh', '-c', guestSource('pod-files.sh'), 'berth-files', ...args];
  const failure = (ref: SandboxRef, path: string, exitCode: number, stderr: string): Error => {
    const code = EXIT_CODES[exitCode];
    if (code) return new SandboxFileError(code, stderr.trim() || `${path}: failed`, path);
    return new ProviderError(provider, `files in pod: exit ${exitCode}: ${stderr.trim().slice(0, 300)}`, { sandbox: ref.id });
  };
  /** Runs an operation and answers its whole stdout. */
  const run = async (ref: SandboxRef, path: string, args: string[], stdin?: Readable): Promise<Buffer> => {
    const stdout = new Collect();
    let result;
    try {
      result = await streamInPod(kubeConfig, targetOf(ref), command(args), { stdout, ...(stdin ? { stdin } : {}), timeoutMs: FILE_EXEC_MS });
    } catch (error) {
      throw new ProviderError(provider, `files in pod: ${(error as Error).message}`, { sandbox: ref.id });
    }
    if (result.exitCode !== 0) throw failure(ref, path, result.exitCode, result.stderr);
    return Buffer.concat(stdout.chunks);
  };
  const one = async (ref: SandboxRef, path: string, args: string[]): Promise<FileInfo> => {
    const entry = parseEntries(await run(ref, path, args))[0];
    if (!entry) throw new ProviderError(provider, `files in pod: no entry for ${path}`, { sandbox: ref.id });
    return entry;
  };
  /** An operation whose stdout is an entry, then a body: the entry once it came, the body as it comes. */
  const stream = (ref: SandboxRef, path: string, args: string[]): Promise<{ info: FileInfo; body: Readable }> =>
    new Promise((resolve, reject) => {
      const raw = new PassThrough();
      const body = new PassThrough();
      let header: Buffer = Buffer.alloc(0);
      let info: FileInfo | undefined;
      raw.on('data', (chunk: Buffer) => {
        if (info) {
          if (!body.write(chunk)) raw.pause();
          return;
        }
        header = Buffer.concat([header, chunk]);
        let nul = -1;
        for (let count = 0; count < FIELDS; count++) {
          nul = header.indexOf(0, nul + 1);
          if (nul < 0) return;
        }
        info = parseEntries(header.subarray(0, nul + 1))[0]!;
        resolve({ info, body });
        const rest = header.subarray(nul + 1);
        if (rest.length > 0) body.write(rest);
      });
      body.on('drain', () => raw.resume());
      // The body ends once both the bytes ended and the command said it succeeded, in either order.
      let rawEnded = false;
      let succeeded = false;
      raw.once('end', () => {
        rawEnded = true;
        if (succeeded) body.end();
      });
      streamInPod(kubeConfig, targetOf(ref), command(args), { stdout: raw, timeoutMs: FILE_EXEC_MS }).then(
        (result) => {
          if (result.exitCode === 0 && info) {
            succeeded = true;
            if (rawEnded) body.end();
            return;
          }
          const error = info ? new ProviderError(provider, `files in pod: exit ${result.exitCode}: ${result.stderr.trim().slice(0, 300)}`, { sandbox: ref.id }) : failure(ref, path, result.exitCode, result.stderr);
          if (info) body.destroy(error);
          else reject(error);
        },
        (error: unknown) => {
          const failed = new ProviderError(provider, `files in pod: ${(error as Error).message}`, { sandbox: ref.id });
          if (info) body.destroy(failed);
          else reject(failed);
        },
      );
    });

  return {
    stat: (ref, path) => one(ref, path, ['stat', path]),
    list: async (ref, path) => {
      const entries = parseEntries(await run(ref, path, ['list', path])).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      return { entries: entries.slice(0, MAX_LIST_ENTRIES), omitted: Math.max(0, entries.length - MAX_LIST_ENTRIES) };
    },
    read: (ref, path) => stream(ref, path, ['read', path]),
    archive: (ref, path) => stream(ref, path, ['tar', path]),
    write: async (ref, path, body, options) => {
      const nonce = randomBytes(8).toString('hex');
      try {
        await run(ref, path, ['receive', path, nonce, options.parents ? '1' : '0'], body);
        if (body.errored || !body.readableEnded) throw new ProviderError(provider, 'the upload ended before its body did', { sandbox: ref.id });
      } catch (error) {
        await run(ref, path, ['discard', path, nonce]).catch(() => undefined);
        throw error;
      }
      return one(ref, path, ['commit', path, nonce, (options.mode ?? 0o644).toString(8)]);
    },
    mkdir: (ref, path, options) => one(ref, path, ['mkdir', path, options.parents ? '1' : '0']),
    remove: async (ref, path, options) => {
      await run(ref, path, ['remove', path, options.recursive ? '1' : '0']);
    },
    move: (ref, from, to, options) => one(ref, from, ['move', from, to, options.overwrite ? '1' : '0']),
  };
}

/** How long a relayed connection to a pod's port may stay open. */
const RELAY_MS = 24 * 60 * 60 * 1000;

/**
 * A TCP connection to `port` on the pod's loopback: `pod-relay.sh` exec'd in the pod, its stdin and
 * stdout the connection's two ways. Resolves once the relay says it connected.
 */
export function podTunnel(provider: string, kubeConfig: KubeConfig, target: Target, ref: SandboxRef, port: number): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const toPod = new PassThrough();
    const fromPod = new PassThrough();
    let connected = false;
    const output = new PassThrough();
    output.on('data', (chunk: Buffer) => {
      if (connected) {
        if (!fromPod.write(chunk)) output.pause();
        return;
      }
      connected = true;
      const tunnel = Object.assign(Duplex.from({ writable: toPod, readable: fromPod }), {
        setNoDelay: () => tunnel,
        setKeepAlive: () => tunnel,
        setTimeout: () => tunnel,
        ref: () => tunnel,
        unref: () => tunnel,
      });
      tunnel.on('error', () => undefined);
      tunnel.on('close', () => toPod.end());
      resolve(tunnel);
      if (chunk.length > 1) fromPod.write(chunk.subarray(1));
    });
    fromPod.on('drain', () => output.resume());
    output.on('end', () => fromPod.end());
    streamInPod(kubeConfig, target, ['bash', '-c', guestSource('pod-relay.sh'), 'berth-relay', String(port)], { stdin: toPod, stdout: output, timeoutMs: RELAY_MS }).then(
      (result) => {
        if (connected) return;
        reject(result.exitCode === 7 ? new PortClosedError(port, `nothing accepts connections on port ${port} in the pod: ${result.stderr.trim().slice(0, 200)}`) : new ProviderError(provider, `the relay to port ${port} ended with ${result.exitCode}: ${result.stderr.trim().slice(0, 200)}`, { sandbox: ref.id, port }));
      },
      (error: unknown) => {
        if (connected) fromPod.destroy(error as Error);
        else reject(new ProviderError(provider, `the relay to port ${port}: ${(error as Error).message}`, { sandbox: ref.id, port }));
      },
    );
  });
}
