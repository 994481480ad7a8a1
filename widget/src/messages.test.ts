import { describe, expect, it } from 'vitest';
import { addPending, applyDelta, applyStreamed, confirmSent, dropPending, fromHistory, keepUnanswered, mergeHistory, type ShownMessage } from './messages.js';

const texts = (list: ShownMessage[]) =>
  list.map((m) => `${m.role}:${m.content}${m.id ? `#${m.id}` : ''}${m.pending ? ' (pending)' : ''}${m.writing ? ' (writing)' : ''}`);

describe('the conversation as shown', () => {
  it('shows the visitor message at once, then its id and the reply from the answer', () => {
    let list = addPending([], 'local:1', 'hello');
    expect(texts(list)).toEqual(['user:hello (pending)']);
    list = confirmSent(list, 'local:1', 'msg_1', { id: 'msg_2', role: 'assistant', content: 'Hi there' });
    expect(texts(list)).toEqual(['user:hello#msg_1', 'assistant:Hi there#msg_2']);
    expect(list.map((m) => m.key)).toEqual(['local:1', 'msg_2']);
  });

  it('writes a reply piece by piece, then shows it whole once, from the stream or the answer, whichever comes first', () => {
    let list = addPending([], 'local:1', 'hello');
    list = applyStreamed(list, { messageId: 'msg_1', role: 'user', content: 'hello' });
    list = applyDelta(list, { messageId: 'msg_2', text: 'Hi ' });
    expect(texts(list)).toEqual(['user:hello#msg_1', 'assistant:Hi #msg_2 (writing)']);
    list = applyDelta(list, { messageId: 'msg_2', text: 'there' });
    expect(texts(list)).toEqual(['user:hello#msg_1', 'assistant:Hi there#msg_2 (writing)']);
    const byStream = applyStreamed(list, { messageId: 'msg_2', role: 'assistant', content: 'Hi there!' });
    const byAnswer = confirmSent(list, 'local:1', 'msg_1', { id: 'msg_2', role: 'assistant', content: 'Hi there!' });
    for (const whole of [byStream, byAnswer]) {
      expect(texts(whole)).toEqual(['user:hello#msg_1', 'assistant:Hi there!#msg_2']);
      // Then the other one changes nothing, and a late piece is not added.
      expect(texts(confirmSent(whole, 'local:1', 'msg_1', { id: 'msg_2', role: 'assistant', content: 'Hi there!' }))).toEqual(texts(whole));
      expect(texts(applyStreamed(whole, { messageId: 'msg_2', role: 'assistant', content: 'Hi there!' }))).toEqual(texts(whole));
      expect(texts(applyDelta(whole, { messageId: 'msg_2', text: ' late' }))).toEqual(texts(whole));
    }
    // One element throughout: the key of the first piece.
    expect(byAnswer.map((m) => m.key)).toEqual(['local:1', 'msg_2']);
  });

  it('shows a repeated text again when it is a new message', () => {
    let list = fromHistory([
      { id: 'msg_1', role: 'user', content: 'thanks' },
      { id: 'msg_2', role: 'assistant', content: 'You are welcome' },
    ]);
    list = confirmSent(addPending(list, 'local:1', 'thanks'), 'local:1', 'msg_3', { id: 'msg_4', role: 'assistant', content: 'You are welcome' });
    expect(texts(list)).toEqual(['user:thanks#msg_1', 'assistant:You are welcome#msg_2', 'user:thanks#msg_3', 'assistant:You are welcome#msg_4']);
  });

  it('shows the visitor message sent from another tab', () => {
    const list = applyStreamed(fromHistory([{ id: 'msg_1', role: 'user', content: 'a' }]), { messageId: 'msg_5', role: 'user', content: 'from the other tab' });
    expect(texts(list)).toEqual(['user:a#msg_1', 'user:from the other tab#msg_5']);
  });

  it('takes a failed message out again', () => {
    const list = dropPending(addPending(fromHistory([{ id: 'msg_1', role: 'user', content: 'a' }]), 'local:1', 'b'), 'local:1');
    expect(texts(list)).toEqual(['user:a#msg_1']);
  });

  it('keeps a stored message whose reply failed, and gives it its id from the stream', () => {
    let list = keepUnanswered(addPending([], 'local:1', 'hello'), 'local:1');
    expect(texts(list)).toEqual(['user:hello']);
    list = applyStreamed(list, { messageId: 'msg_1', role: 'user', content: 'hello' });
    list = applyStreamed(list, { messageId: 'msg_2', role: 'assistant', content: 'late reply' });
    expect(texts(list)).toEqual(['user:hello#msg_1', 'assistant:late reply#msg_2']);
  });

  it('merges history as the truth, keeping keys and what it does not hold yet', () => {
    let list = confirmSent(addPending([], 'local:1', 'hello'), 'local:1', 'msg_1', { id: 'msg_2', role: 'assistant', content: 'Hi' });
    list = addPending(list, 'local:2', 'still sending');
    list = applyDelta(list, { messageId: 'msg_9', text: 'being wri' });
    const merged = mergeHistory(list, [
      { id: 'msg_0', role: 'assistant', content: 'an earlier message' },
      { id: 'msg_1', role: 'user', content: 'hello' },
      { id: 'msg_2', role: 'assistant', content: 'Hi' },
    ]);
    expect(texts(merged)).toEqual([
      'assistant:an earlier message#msg_0',
      'user:hello#msg_1',
      'assistant:Hi#msg_2',
      'user:still sending (pending)',
      'assistant:being wri#msg_9 (writing)',
    ]);
    expect(merged.map((m) => m.key)).toEqual(['msg_0', 'local:1', 'msg_2', 'local:2', 'msg_9']);
  });

  it('shows a message once when the history read during its send holds it already', () => {
    let list = addPending([], 'local:1', 'hello');
    list = mergeHistory(list, [{ id: 'msg_1', role: 'user', content: 'hello' }]);
    list = confirmSent(list, 'local:1', 'msg_1', { id: 'msg_2', role: 'assistant', content: 'Hi' });
    expect(texts(list)).toEqual(['user:hello#msg_1', 'assistant:Hi#msg_2']);
  });
});
