import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';

/** `total` deterministic bytes in 64 KiB chunks made as they are read: never the whole thing in memory. */
export function generated(total: number): Readable {
  return Readable.from(
    (function* () {
      for (let offset = 0, index = 0; offset < total; index++) {
        const chunk = Buffer.alloc(Math.min(64 * 1024, total - offset), `chunk ${index};`);
        offset += chunk.length;
        yield chunk;
      }
    })(),
  );
}

/** The SHA-256 of a stream, read to its end. */
export async function digestOf(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
