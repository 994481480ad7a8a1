import { createHash } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { gzipSync } from 'node:zlib';
import type { SandboxRef } from '@berth/crds';
import {
  ArchiveIntegrityError,
  ProviderError,
  UnsupportedRequestError,
  unsupportedReason,
  storedArchiveOf,
  verifyArchive,
  type CheckpointResult,
  type CheckpointTarget,
  type ExecRequest,
  type ExecResult,
  type ProviderCapabilities,
  type ProvisionRequest,
  type RestoreSource,
  type SandboxProvider,
  type SandboxState,
} from '@berth/common';

/**
 * What test keys (`svc_test_`) get instead of compute: the same validation and the same
 * shapes, answered at once, deterministic, and without touching a real provider.
 */
export class MockProvider implements SandboxProvider {
  readonly name = 'mock';

  /** Mirrors the capabilities of the provider it stands in for, so test keys are refused what live keys are. */
  constructor(readonly capabilities: ProviderCapabilities) {}

  async provision(request: ProvisionRequest): Promise<SandboxRef> {
    const unsupported = unsupportedReason(this, request);
    if (unsupported) throw new UnsupportedRequestError(this.name, `${unsupported.field}: ${unsupported.message}`);
    if (request.restore) await this.readSnapshot(request.restore);
    return { provider: this.name, id: request.agentId };
  }

  /** Reads the archive through its digest check, as a real restore does, so that corruption fails the same way. */
  private async readSnapshot(source: RestoreSource): Promise<void> {
    const { storage } = source;
    const archive = storedArchiveOf(this.name, source);
    try {
      const discard = new Writable({ write: (_chunk, _encoding, done) => done() });
      await pipeline(await storage.get(archive.key), verifyArchive(archive.key, archive.sha256), discard);
    } catch (error) {
      const corrupted = error instanceof ArchiveIntegrityError;
      throw new ProviderError(this.name, (error as Error).message, { key: archive.key, corrupted });
    }
  }

  /** Stores a tiny archive in the layout of real snapshots, at the level asked for. */
  async checkpoint(ref: SandboxRef, { storage, key, native }: CheckpointTarget): Promise<CheckpointResult> {
    const level = native ? 'native' : 'filesystem';
    const manifest = { formatVersion: 1, provider: this.name, level, agentId: ref.id };
    const stored = await storage.put(key, Readable.from([tinyArchive(manifest)]));
    return { ...stored, level };
  }

  async state(): Promise<SandboxState> {
    return 'running';
  }

  async exec(_ref: SandboxRef, request: ExecRequest): Promise<ExecResult> {
    const digest = createHash('sha256').update(request.language).update('\0').update(request.code).digest();
    return {
      stdout: `[test mode] ${request.language} code (${Buffer.byteLength(request.code)} bytes) accepted; test keys do not run code\n`,
      stderr: '',
      exitCode: 0,
      durationMs: 5 + (digest[0]! % 40),
    };
  }

  async terminate(): Promise<void> {}
}

/** A gzipped tar of `manifest.json` and an empty `workspace/`, made in memory; the same input gives the same bytes. */
function tinyArchive(manifest: Record<string, unknown>): Buffer {
  const content = Buffer.from(JSON.stringify(manifest));
  const padding = Buffer.alloc((512 - (content.length % 512)) % 512);
  const end = Buffer.alloc(1024); // two zero blocks end a tar
  const entries = [tarHeader('manifest.json', content.length, 'file'), content, padding, tarHeader('workspace/', 0, 'directory')];
  return gzipSync(Buffer.concat([...entries, end]));
}

/** A ustar header block (POSIX.1-1988), the fields GNU tar needs and zeros elsewhere. */
function tarHeader(name: string, size: number, type: 'file' | 'directory'): Buffer {
  const header = Buffer.alloc(512);
  const octal = (value: number, width: number) => `${value.toString(8).padStart(width - 1, '0')}\0`;
  header.write(name, 0);
  header.write(octal(type === 'file' ? 0o644 : 0o755, 8), 100);
  header.write(octal(0, 8), 108);
  header.write(octal(0, 8), 116);
  header.write(octal(size, 12), 124);
  header.write(octal(0, 12), 136);
  header.write(type === 'file' ? '0' : '5', 156);
  header.write('ustar\u000000', 257); // magic "ustar\0", version "00"
  header.write(' '.repeat(8), 148); // the checksum counts its own field as spaces
  const checksum = header.reduce((sum, byte) => sum + byte, 0);
  header.write(`${checksum.toString(8).padStart(6, '0')}\0 `, 148);
  return header;
}
