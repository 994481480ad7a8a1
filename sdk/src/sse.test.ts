import { describe, expect, it } from 'vitest';
import { readEvents } from './sse.js';

function body(pieces: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const piece of pieces) controller.enqueue(encoder.encode(piece));
      controller.close();
    },
  });
}

describe('reading an event stream', () => {
  it('reads events split anywhere, skipping comments and retry, joining data lines', async () => {
    const events = [];
    for await (const event of readEvents(body(['retry: 2000\n\n: comment\nid: 1\nev', 'ent: stdout\ndata: {"seq":1,', '"data":"a"}\n\r\nevent: exit\ndata: x\ndata: y\n\n', 'data: tail']))) events.push(event);
    expect(events).toEqual([
      { event: 'stdout', id: '1', data: '{"seq":1,"data":"a"}' },
      { event: 'exit', id: '1', data: 'x\ny' },
    ]);
  });
});
