import { describe, expect, it } from 'vitest';
import { chunkText } from './knowledge.js';

describe('chunkText', () => {
  it('keeps a short text whole, trimmed, and gives nothing for blank text', () => {
    expect(chunkText('  Refunds take 14 days.\n')).toEqual(['Refunds take 14 days.']);
    expect(chunkText(' \n\t ')).toEqual([]);
  });

  it('cuts at a paragraph break before a sentence end or a space', () => {
    const first = 'a'.repeat(60) + '. ' + 'b'.repeat(20);
    const second = 'c'.repeat(50);
    const chunks = chunkText(`${first}\n\n${second}`, 100, 0);
    expect(chunks).toEqual([first, second]);
  });

  it('cuts long prose at word boundaries, every chunk within the size, repeating the overlap', () => {
    const words = Array.from({ length: 400 }, (_, index) => `word${index}`);
    const chunks = chunkText(words.join(' '), 200, 40);
    expect(chunks.length).toBeGreaterThan(10);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(200);
      // whole words only
      for (const word of chunk.split(' ')) expect(word).toMatch(/^word\d+$/);
    }
    // every word is in some chunk, and consecutive chunks share their boundary words
    const seen = new Set(chunks.flatMap((chunk) => chunk.split(' ')));
    expect(seen.size).toBe(400);
    for (let index = 1; index < chunks.length; index++) {
      const lastOfPrevious = chunks[index - 1]!.split(' ').at(-1)!;
      expect(chunks[index]!.split(' ')).toContain(lastOfPrevious);
    }
  });

  it('cuts text without spaces at the size', () => {
    expect(chunkText('x'.repeat(250), 100, 0)).toEqual(['x'.repeat(100), 'x'.repeat(100), 'x'.repeat(50)]);
  });
});
