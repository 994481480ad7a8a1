import { spawn, type ChildProcess } from 'node:child_process';
import { Transform, Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { detectCompression, meterArchive } from '@berth/common';

/**
 * Snapshot archives as compressed tars, made and read by the system `tar` as child processes
 * whose stdin or stdout is the stream: an archive is never whole in memory, nor copied on disk.
 *
 * Made with zstd: a memory image is hundreds of megabytes, and zstd (level 3, a thread per core)
 * packs it 8 times (mostly empty pages) to 20 times (incompressible ones) faster than gzip, for a
 * smaller archive. Read as zstd or gzip (what the Kubernetes provider's pods write), whichever the
 * first bytes say.
 */

/** A directory, and the names in it to archive (in this order). */
export interface ArchivePart {
  dir: string;
  names: readonly string[];
}

const MEMBER_LIMIT_BYTES = 4 * 1024 * 1024;

/**
 * A zstd-compressed tar of `parts`, streamed as tar makes it. The stream fails when tar fails, or
 * when `signal` aborts (tar is killed).
 */
export function packArchive(parts: readonly ArchivePart[], signal?: AbortSignal): Readable {
  // At a lower priority: archives are made in the background (after the pause answered), and
  // zstd's threads would otherwise take the cores from the sandboxes and requests in the foreground.
  const tar = spawn(
    'nice',
    ['-n', '10', 'tar', '--create', '--use-compress-program=zstd -3 -T0 -q', '--file=-', '--numeric-owner', ...parts.flatMap(({ dir, names }) => ['--directory', dir, ...names])],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = exitOf(tar);
  // tar's output ends before its exit status is known: hold the end of the stream until tar says
  // it succeeded, so that a failed tar fails the upload instead of storing a truncated archive.
  const checked = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      done(null, chunk);
    },
    flush(done) {
      exited.then(({ code, stderr }) => done(code === 0 ? null : new Error(`tar failed (exit ${code}): ${stderr}`)), done);
    },
  });
  // A reader that gives up (the upload failed) stops tar too.
  checked.on('close', () => {
    if (tar.exitCode === null) tar.kill('SIGKILL');
  });
  pipeline(tar.stdout!, checked).catch(() => undefined); // errors reach the reader through `checked`
  const cancel = () => checked.destroy(new Error('the archive was cancelled'));
  if (signal?.aborted) cancel();
  else signal?.addEventListener('abort', cancel, { once: true });
  return checked;
}

/**
 * Extracts the archive `source` into `dir`, streaming it through `check` (a digest check that
 * fails at the end of the stream). The stream's failure wins over tar's: a corrupt archive makes
 * tar fail too, and the caller wants to know it was corrupt.
 */
export async function extractArchive(source: Readable, check: Transform, dir: string): Promise<void> {
  await intoTar(source, check, ['--extract', '--file=-', '--numeric-owner', '--directory', dir]);
}

/** One file of the archive `source`, with the SHA-256 and size of the whole archive. */
export async function readMember(source: Readable, name: string): Promise<{ content: string; sha256: string; sizeBytes: number }> {
  const meter = meterArchive();
  const content = await intoTar(source, meter.stream, ['--extract', '--file=-', '--to-stdout', name]);
  return { content, ...meter.result() };
}

/**
 * Streams `source` through `check` into tar's stdin, with the compression its first bytes name;
 * tar's stdout (bounded) when both succeed.
 */
async function intoTar(archive: Readable, check: Transform, args: string[]): Promise<string> {
  const { compression, stream: source } = await detectCompression(archive);
  const tar = spawn('tar', compression ? [`--${compression}`, ...args] : args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const stdout: Buffer[] = [];
  let stdoutBytes = 0;
  tar.stdout!.on('data', (chunk: Buffer) => {
    if (stdoutBytes >= MEMBER_LIMIT_BYTES) return;
    stdout.push(chunk);
    stdoutBytes += chunk.length;
  });
  const exited = exitOf(tar);
  const [streamed, tarResult] = await Promise.allSettled([pipeline(source, check, forwardWhileOpen(tar.stdin!)), exited]);
  if (streamed.status === 'rejected') throw streamed.reason;
  if (tarResult.status === 'rejected') throw tarResult.reason;
  if (tarResult.value.code !== 0) throw new Error(`tar failed (exit ${tarResult.value.code}): ${tarResult.value.stderr}`);
  return Buffer.concat(stdout).toString('utf8');
}

/**
 * Writes into `target` until it closes, then drops the rest: when tar stops reading early (a
 * corrupt archive), the source is still read to its end, so that its digest check can say so.
 */
function forwardWhileOpen(target: Writable): Writable {
  target.on('error', () => undefined); // EPIPE after tar exited; its exit status says why
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (target.destroyed || target.writableEnded) return done();
      if (target.write(chunk)) return done();
      const resume = () => {
        target.off('drain', resume).off('close', resume);
        done();
      };
      target.on('drain', resume).on('close', resume);
    },
    final(done) {
      target.end();
      done();
    },
    destroy(error, done) {
      target.destroy(); // tar sees the end of its input and exits
      done(error);
    },
  });
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; stderr: string }> {
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-2_000);
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stderr: stderr.trim() }));
  });
}
