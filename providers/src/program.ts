import type { ExecLanguage } from '@berth/common';

/**
 * How every provider runs an exec'd program: written to a file with the language's extension
 * (Node decides TypeScript by it) and started by the interpreter, with its limit enforced inside
 * the sandbox (the local launcher's timer; `timeout` in a pod, see kubernetes/exec-script.ts).
 */
export const INTERPRETERS: Record<ExecLanguage, { extension: string; argv: readonly string[] }> = {
  python: { extension: 'py', argv: ['python3', '-u'] },
  typescript: { extension: 'ts', argv: ['node', '--experimental-transform-types', '--disable-warning=ExperimentalWarning'] },
  bash: { extension: 'sh', argv: ['bash'] },
};

/** How many of a stream's last bytes `OutputLimit.tail` keeps, whatever the limit cut. */
const TAIL_BYTES = 4096;

/**
 * Keeps the first `limit` bytes of a stream and says how many more there were; keeps its last
 * few kilobytes apart too, where a wrapper's closing record is found after any amount of output.
 */
export class OutputLimit {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private dropped = 0;
  private last = Buffer.alloc(0);

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.last = Buffer.concat([this.last, chunk]);
    if (this.last.length > TAIL_BYTES) this.last = this.last.subarray(this.last.length - TAIL_BYTES);
    const room = Math.max(0, this.limit - this.kept);
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (part.length > 0) {
      this.chunks.push(part);
      this.kept += part.length;
    }
    this.dropped += chunk.length - part.length;
  }

  /** The stream's last bytes (up to 4 KiB), as text. */
  tail(): string {
    return this.last.toString('utf8');
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
