import { describe, expect, it } from 'vitest';
import { estimateNextCall, type LoopProgress } from './loop.js';

describe('estimateNextCall', () => {
  const progress = (conversation: LoopProgress['conversation']): LoopProgress => ({ conversation, steps: 0, inputTokens: 0, outputTokens: 0, guardrailHits: [] });

  it('counts about four characters a token before the first call, and no output', () => {
    expect(estimateNextCall(progress([{ role: 'user', content: 'x'.repeat(400) }]), 'y'.repeat(100), undefined, 0)).toEqual({ inputTokens: 125, outputTokens: 0 });
  });

  it("adds what came since the last call to its input, and expects its output again", () => {
    const conversation: LoopProgress['conversation'] = [
      { role: 'user', content: 'task' },
      { role: 'assistant', content: 'ok', toolCalls: [] },
      { role: 'tool', toolCallId: 'c1', name: 'exec', content: 'z'.repeat(4000), isError: false },
    ];
    const estimate = estimateNextCall(progress(conversation), undefined, { inputTokens: 1000, outputTokens: 50 }, 1);
    expect(estimate).toEqual({ inputTokens: 2000, outputTokens: 50 });
  });
});
