import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { readArchiveManifest } from './node-agent.js';

/** One tar entry: a 512-byte header (name, octal size) and the content padded to 512 bytes. */
function entry(name: string, content: string): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0, 'utf8');
  header.write(`${Buffer.byteLength(content).toString(8).padStart(11, '0')}\0`, 124, 'utf8');
  const body = Buffer.alloc(Math.ceil(Buffer.byteLength(content) / 512) * 512);
  body.write(content, 0, 'utf8');
  return Buffer.concat([header, body]);
}

/** A gzipped stream delivered in small chunks, as storage gives it. */
const archive = (...entries: Buffer[]) => {
  const bytes = gzipSync(Buffer.concat([...entries, Buffer.alloc(1024)]));
  return Readable.from(Array.from({ length: Math.ceil(bytes.length / 7) }, (_, i) => bytes.subarray(i * 7, i * 7 + 7)));
};

describe('readArchiveManifest', () => {
  const manifest = { format: 1, provider: 'kubernetes', level: 'native', node: 'node-a', runscVersion: 'release-20260905.0', podUid: 'u' };

  it('reads the manifest from the first entry of a native archive without the rest', async () => {
    expect(await readArchiveManifest(archive(entry('manifest.json', JSON.stringify(manifest)), entry('checkpoint/checkpoint.img', 'x'.repeat(5000))))).toEqual(manifest);
  });

  it('has none for a filesystem-level archive, whose first entry is the workspace', async () => {
    expect(await readArchiveManifest(archive(entry('workspace/', ''), entry('manifest.json', JSON.stringify(manifest))))).toBeUndefined();
  });

  it('has none for what is not a gzipped tar, or a manifest that is not JSON', async () => {
    expect(await readArchiveManifest(Readable.from([Buffer.from('plain text, not gzip')]))).toBeUndefined();
    expect(await readArchiveManifest(archive(entry('manifest.json', '{not json')))).toBeUndefined();
  });
});
