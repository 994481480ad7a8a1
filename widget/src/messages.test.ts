import { describe, expect, it } from 'vitest';
import { addPending, applyStreamed, confirmSent, dropPending, fromHistory, keepUnanswered, mergeHistory, type ShownMessage } from './messages.js';

const texts = (list: ShownMessage[]) => list.map((m) => `${m.role}:${m.content}${m.id ? `#${m.id}` : ''}${m.pending ? ' (pending)' : ''}`);

describe('the conversation as shown', () => {
  it('shows the visitor message at once, then its id and the reply from the answer', () => {
    let list = addPending([], 'local:1', 'hello');
    expect(texts(list)).toEqual(['user:hello (pending)']);
    list = confirmSent(list, 'local:1', 'msg_1', { role: 'assistant', content: 'Hi there' });
    expect(texts(list)).toEqual(['user:hello#msg_1', 'assistant:Hi there']);
    expect(list[1]!.key).toBe('reply:msg_1');
  });

  it('does not show a reply twice when the stream delivered it before the answer', () => {
    let list = addPending([], 'local:1', 'hello');
    list = applyStreamed(list, { messageId: 'msg_1', role: 'user', content: 'hello' });
    list = applyStreamed(list, { messageId: 'msg_2', role: 'assistant', content: 'Hi there' });
    list = confirmSent(list, 'local:1', 'msg_1', { role: 'assistant', content: 'Hi there' });
    expect(texts(list)).toEqual(['user:hello#msg_1', 'assistant:Hi there#msg_2']);
  });

  it('gives the reply shown from the answer its id when the stream delivers it after', () => {
    let list = confirmSent(addPending([], 'local:1', 'hello'), 'local:1', 'msg_1', { role: 'assistant', content: 'Hi' });
    list = applyStreamed(list, { messageId: 'msg_1', role: 'user', content: 'hello' });
    list = applyStreamed(list, { messageId: 'msg_2', role: 'assistant', content: 'Hi' });
    expect(texts(list)).toEqual(['user:hello#msg_1', 'assistant:Hi#msg_2']);
    expect(list.map((m) => m.key)).toEqual(['local:1', 'reply:msg_1']);
  });

  it('grows a streamed reply in place under its id', () => {
    let list = applyStreamed([], { messageId: 'msg_2', role: 'assistant', content: 'Hel' });
    list = applyStreamed(list, { messageId: 'msg_2', role: 'assistant', content: 'Hello, how can I help?' });
    expect(texts(list)).toEqual(['assistant:Hello, how can I help?#msg_2']);
  });

  it('shows a repeated reply again when it is a new message', () => {
    let list = fromHistory([
      { id: 'msg_1', role: 'user', content: 'thanks' },
      { id: 'msg_2', role: 'assistant', content: 'You are welcome' },
    ]);
    list = confirmSent(addPending(list, 'local:1', 'thanks'), 'local:1', 'msg_3', { role: 'assistant', content: 'You are welcome' });
    expect(texts(list)).toEqual(['user:thanks#msg_1', 'assistant:You are welcome#msg_2', 'user:thanks#msg_3', 'assistant:You are welcome']);
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
    let list = confirmSent(addPending([], 'local:1', 'hello'), 'local:1', 'msg_1', { role: 'assistant', content: 'Hi' });
    list = addPending(list, 'local:2', 'still sending');
    const merged = mergeHistory(list, [
      { id: 'msg_0', role: 'assistant', content: 'an earlier message' },
      { id: 'msg_1', role: 'user', content: 'hello' },
      { id: 'msg_2', role: 'assistant', content: 'Hi' },
    ]);
    expect(texts(merged)).toEqual(['assistant:an earlier message#msg_0', 'user:hello#msg_1', 'assistant:Hi#msg_2', 'user:still sending (pending)']);
    expect(merged.map((m) => m.key)).toEqual(['msg_0', 'local:1', 'msg_2', 'local:2']);
  });

  it('keeps a reply shown from an answer that the history does not hold yet', () => {
    const list = confirmSent(addPending([], 'local:1', 'hello'), 'local:1', 'msg_1', { role: 'assistant', content: 'Hi' });
    const merged = mergeHistory(list, [{ id: 'msg_1', role: 'user', content: 'hello' }]);
    expect(texts(merged)).toEqual(['user:hello#msg_1', 'assistant:Hi']);
  });
});
