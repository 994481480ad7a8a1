import { describe, expect, it, vi } from 'vitest';
import { WorkQueue } from './workqueue.js';

describe('WorkQueue', () => {
  it('keeps one entry per key however often it is added', async () => {
    const queue = new WorkQueue();
    queue.add('a');
    queue.add('b');
    queue.add('a');
    expect(queue.depth).toBe(2);
    expect(await queue.get()).toBe('a');
    expect(await queue.get()).toBe('b');
  });

  it('never hands out a key that is being worked on; an add meanwhile runs it again after', async () => {
    const queue = new WorkQueue();
    queue.add('a');
    const key = await queue.get();
    queue.add('a');
    expect(queue.depth).toBe(0);
    queue.done(key!);
    expect(queue.depth).toBe(1);
    expect(await queue.get()).toBe('a');
  });

  it('wakes a waiting worker', async () => {
    const queue = new WorkQueue();
    const waiting = queue.get();
    queue.add('x');
    expect(await waiting).toBe('x');
  });

  it('backs off exponentially per key and forgets on success', () => {
    const queue = new WorkQueue({ baseDelayMs: 10, maxDelayMs: 50 });
    expect([1, 2, 3, 4, 5].map(() => queue.addRateLimited('k'))).toEqual([10, 20, 40, 50, 50]);
    queue.forget('k');
    expect(queue.addRateLimited('k')).toBe(10);
    queue.shutDown();
  });

  it('adds after a delay, keeping the earliest of several', async () => {
    vi.useFakeTimers();
    try {
      const queue = new WorkQueue();
      queue.addAfter('k', 1000);
      queue.addAfter('k', 100);
      queue.addAfter('k', 5000);
      vi.advanceTimersByTime(99);
      expect(queue.depth).toBe(0);
      vi.advanceTimersByTime(1);
      expect(queue.depth).toBe(1);
      await queue.get();
      queue.done('k');
      vi.advanceTimersByTime(10_000);
      expect(queue.depth).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('releases waiting workers on shutdown and takes no more work', async () => {
    const queue = new WorkQueue();
    const waiting = queue.get();
    queue.shutDown();
    expect(await waiting).toBeUndefined();
    queue.add('late');
    expect(queue.depth).toBe(0);
  });
});
