import { createHash } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { gzipSync } from 'node:zlib';
import type { SandboxRef } from '@berth/crds';
import {
  ArchiveIntegrityError,
  EXEC_OPTIONS,
  ProcessNotFoundError,
  ProviderError,
  UnsupportedRequestError,
  unsupportedReason,
  storedArchiveOf,
  verifyArchive,
  type CheckpointResult,
  type CheckpointTarget,
  type BackgroundOutput,
  type BackgroundProcess,
  type ExecRequest,
  type ExecResult,
  type ProcessSignal,
  type StreamExecRequest,
  type TerminalHandle,
  type TerminalRequest,
  type ProviderCapabilities,
  type ProvisionRequest,
  type RestoreSource,
  type SandboxProvider,
  type SandboxState,
  PortClosedError,
} from '@berth/common';
import { MockFiles } from './mock-files.js';

/**
 * What test keys (`svc_test_`) get instead of compute: the same validation and the same
 * shapes, answered at once, deterministic, and without touching a real provider.
 */
export class MockProvider implements SandboxProvider {
  readonly name = 'mock';
  readonly execOptions = EXEC_OPTIONS;
  /** Background processes by sandbox, then pid: they end when waited on (test keys run nothing). */
  private readonly processes = new Map<string, Map<number, BackgroundProcess & { stdout: string }>>();
  private nextPid = 1000;
  /** An in-memory file tree per sandbox (ADR 40). */
  readonly files = new MockFiles();

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
    return { stdout: fakeOutput(request), stderr: '', exitCode: 0, durationMs: 5 + (digest[0]! % 40) };
  }

  /** The same fake output, in three chunks a few milliseconds apart. */
  async execStream(ref: SandboxRef, request: StreamExecRequest): Promise<ExecResult> {
    const result = await this.exec(ref, request);
    const lines = result.stdout.split(/(?<=\n)/);
    const chunks = [lines[0]!, lines.slice(1).join(''), '[test mode] end of the fake stream\n'].filter((chunk) => chunk !== '');
    for (const chunk of chunks) {
      if (request.signal?.aborted) break;
      request.onOutput('stdout', Buffer.from(chunk));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return { ...result, stdout: chunks.join('') };
  }

  /** A terminal that echoes what it is sent, as a line-mode tty does, after a banner. */
  async openTerminal(_ref: SandboxRef, request: TerminalRequest): Promise<TerminalHandle> {
    let finish: (value: { exitCode: number; signal?: number }) => void = () => undefined;
    const done = new Promise<{ exitCode: number; signal?: number }>((resolve) => (finish = resolve));
    setImmediate(() => request.onOutput(Buffer.from(`[test mode] terminal ${request.cols}x${request.rows} for ${request.argv.join(' ')}; test keys do not run programs: input is echoed\r\n`)));
    return {
      write: (data) => {
        request.onOutput(Buffer.from(data.toString('utf8').replace(/\r?\n/g, '\r\n')));
        if (data.includes(4)) finish({ exitCode: 0 }); // ^D ends it, as it ends a shell
      },
      resize: (rows, cols) => request.onOutput(Buffer.from(`[test mode] resized to ${cols}x${rows}\r\n`)),
      close: () => finish({ exitCode: 128 + 9, signal: 9 }),
      done,
    };
  }

  async startBackground(ref: SandboxRef, request: Omit<ExecRequest, 'timeoutMs'>): Promise<BackgroundProcess> {
    const processes = this.processes.get(ref.id) ?? new Map();
    this.processes.set(ref.id, processes);
    const pid = this.nextPid++;
    const process = { pid, argv: [request.language, '<program>'], startedAt: new Date().toISOString(), status: 'running' as const, exitCode: null, endedAt: null, stdout: fakeOutput(request) };
    processes.set(pid, process);
    return publicProcess(process);
  }

  async listBackground(ref: SandboxRef): Promise<BackgroundProcess[]> {
    return [...(this.processes.get(ref.id)?.values() ?? [])].map(publicProcess);
  }

  async signalBackground(ref: SandboxRef, pid: number, signal: ProcessSignal): Promise<BackgroundProcess> {
    const process = this.process(ref, pid);
    if (process.status === 'running' && signal !== 'CONT' && signal !== 'STOP') {
      const number = { HUP: 1, INT: 2, QUIT: 3, KILL: 9, USR1: 10, USR2: 12, TERM: 15 }[signal];
      Object.assign(process, { status: 'signaled', exitCode: 128 + number, endedAt: new Date().toISOString() });
    }
    return publicProcess(process);
  }

  async waitBackground(ref: SandboxRef, pid: number): Promise<BackgroundProcess> {
    const process = this.process(ref, pid);
    if (process.status === 'running') Object.assign(process, { status: 'exited', exitCode: 0, endedAt: new Date().toISOString() });
    return publicProcess(process);
  }

  async backgroundOutput(ref: SandboxRef, pid: number): Promise<BackgroundOutput> {
    const process = this.process(ref, pid);
    return { ...publicProcess(process), stdout: process.stdout, stderr: '', dropped: { stdout: 0, stderr: 0 } };
  }

  private process(ref: SandboxRef, pid: number): BackgroundProcess & { stdout: string } {
    const process = this.processes.get(ref.id)?.get(pid);
    if (!process) throw new ProcessNotFoundError(pid);
    return process;
  }

  /** Nothing runs under a test key, so nothing listens: a port is refused as a closed one is. */
  async openPort(_ref: SandboxRef, port: number): Promise<never> {
    throw new PortClosedError(port, `nothing accepts connections on port ${port} in the sandbox (test keys run no programs)`);
  }

  async terminate(ref: SandboxRef): Promise<void> {
    this.files.drop(ref.id);
    this.processes.delete(ref.id);
  }
}

/** What test keys get for output: what was asked, echoed (env, cwd, stdin), and that nothing ran. */
function fakeOutput(request: Omit<ExecRequest, 'timeoutMs'>): string {
  const lines = [`[test mode] ${request.language} code (${Buffer.byteLength(request.code)} bytes) accepted; test keys do not run code`];
  if (request.cwd !== undefined) lines.push(`[test mode] cwd: ${request.cwd}`);
  for (const [name, value] of Object.entries(request.env ?? {})) lines.push(`[test mode] env: ${name}=${value}`);
  if (request.stdin !== undefined) lines.push(`[test mode] stdin (${request.stdin.length} bytes): ${request.stdin.toString('utf8').slice(0, 200)}`);
  return lines.map((line) => `${line}\n`).join('');
}

function publicProcess({ stdout: _stdout, ...process }: BackgroundProcess & { stdout: string }): BackgroundProcess {
  return { ...process, argv: [...process.argv] };
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
