import { describe, expect, it } from 'vitest';
import { fleetItemText, promptFieldsOf, renderFleetTask } from './fleets.js';

describe('renderFleetTask', () => {
  it.each([
    ['no prompt, a string item', undefined, 'check example.com', 'check example.com'],
    ['no prompt, an object item', undefined, { url: 'example.com', depth: 2 }, '{"url":"example.com","depth":2}'],
    ['{{item}} of a string', 'Summarise: {{item}}', 'the text', 'Summarise: the text'],
    ['{{item}} of an object', 'Look at {{ item }}.', { a: 1 }, 'Look at {"a":1}.'],
    ['a string field', 'Classify {{item.text}} for {{item.team}}', { text: 'login fails', team: 'auth' }, 'Classify login fails for auth'],
    ['a field that is not a string', 'Tags: {{item.tags}}', { tags: ['a', 'b'] }, 'Tags: ["a","b"]'],
    ['a missing field', 'Owner: {{item.owner}}!', { text: 'x' }, 'Owner: !'],
    ['a field of a string item', 'Owner: {{item.owner}}', 'just text', 'Owner: '],
    ['placeholders used twice', '{{item}} and {{item}}', 'x', 'x and x'],
    ['braces that are not placeholders', '{{items}} {item} {{item}}', 'x', '{{items}} {item} x'],
  ])('%s', (_name, prompt, input, expected) => {
    expect(renderFleetTask(prompt, input)).toBe(expected);
  });

  it('leaves replacement patterns in an item alone', () => {
    expect(renderFleetTask('Say {{item}}', '$& $1 $$')).toBe('Say $& $1 $$');
  });
});

describe('fleetItemText and promptFieldsOf', () => {
  it('gives text as it is and objects as JSON; lists the named fields', () => {
    expect(fleetItemText('a')).toBe('a');
    expect(fleetItemText({ b: [1] })).toBe('{"b":[1]}');
    expect(promptFieldsOf('{{item}} {{item.a}} {{ item.b_c }}')).toEqual(['a', 'b_c']);
  });
});
