import type { ExecLanguage } from '@berth/common';

/**
 * How every provider runs an exec'd program: written to a file with the language's extension
 * (Node decides TypeScript by it), started by the interpreter under coreutils' `timeout`, which
 * stops the program and its process group when its time is up, inside the sandbox.
 */
export const INTERPRETERS: Record<ExecLanguage, { extension: string; argv: readonly string[] }> = {
  python: { extension: 'py', argv: ['python3', '-u'] },
  typescript: { extension: 'ts', argv: ['node', '--experimental-transform-types', '--disable-warning=ExperimentalWarning'] },
  bash: { extension: 'sh', argv: ['bash'] },
};

/** The `timeout` prefix for a limit in milliseconds (whole seconds, at least one). */
export function timeoutPrefix(timeoutMs: number): string[] {
  return ['timeout', '--verbose', '--kill-after=2', String(Math.max(1, Math.ceil(timeoutMs / 1000)))];
}

/** What `timeout --verbose` prints when it has to stop the program. */
const TIMEOUT_NOTICE = /timeout: sending signal \w+ to command [^\n]*\n?$/;

/** Whether `timeout` ended the program (124 after TERM, 137 after KILL, with its notice last on stderr). */
export function stoppedByTimeout(result: { exitCode: number; stderr: string }): boolean {
  return (result.exitCode === 124 || result.exitCode === 137) && TIMEOUT_NOTICE.test(result.stderr);
}

/** Keeps the first `limit` bytes of a stream and says how many more there were. */
export class OutputLimit {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private dropped = 0;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    const room = Math.max(0, this.limit - this.kept);
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (part.length > 0) {
      this.chunks.push(part);
      this.kept += part.length;
    }
    this.dropped += chunk.length - part.length;
  }

  /** Counts bytes dropped before they got here (a sandbox's launcher caps output itself). */
  drop(bytes: number): void {
    this.dropped += bytes;
  }

  text(): string {
    const text = Buffer.concat(this.chunks).toString('utf8');
    return this.dropped > 0 ? `${text}\n[output truncated: ${this.dropped} more bytes not shown]\n` : text;
  }
}
