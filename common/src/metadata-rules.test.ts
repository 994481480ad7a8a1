import { describe, expect, it } from 'vitest';
import { extractionRulesProblem, jsonObjectIn, validateExtraction } from './metadata-rules.js';

const schema = {
  type: 'object',
  properties: { sentiment: { type: 'string', enum: ['positive', 'negative'] }, score: { type: 'integer', minimum: 0, maximum: 10 } },
  required: ['sentiment'],
  additionalProperties: false,
};

describe('extractionRulesProblem', () => {
  it('accepts metadata without rules, and valid rules beside custom pairs', () => {
    expect(extractionRulesProblem(undefined)).toBeUndefined();
    expect(extractionRulesProblem({ team: 'support' })).toBeUndefined();
    expect(extractionRulesProblem({ team: 'support', extract: { schema, instructions: 'score is 0-10' } })).toBeUndefined();
  });

  it.each([
    [{ extract: 'sentiment' }, 'metadata.extract', 'must be an object: { schema, instructions? }'],
    [{ extract: { schema, mode: 'strict' } }, 'metadata.extract', 'unknown keys mode; give schema and optionally instructions'],
    [{ extract: {} }, 'metadata.extract.schema', 'required: the JSON schema of the object to extract'],
    [{ extract: { schema: { type: 'string' } } }, 'metadata.extract.schema', 'metadata.extract.schema.type: must be "object" (the run yields an object of fields)'],
    [{ extract: { schema: { type: 'object', properties: 5 } } }, 'metadata.extract.schema', 'metadata.extract.schema.properties: must be an object'],
    [{ extract: { schema: { type: 'object', properties: { a: { type: 'banana' } } } } }, 'metadata.extract.schema', 'metadata.extract.schema.properties.a.type: unknown type "banana"'],
    [{ extract: { schema: { type: 'object', required: 'a' } } }, 'metadata.extract.schema', 'metadata.extract.schema.required: must be a list of property names'],
    [{ extract: { schema, instructions: 7 } }, 'metadata.extract.instructions', 'must be a string of at most 4000 characters'],
  ])('refuses %j', (metadata, field, message) => {
    expect(extractionRulesProblem(metadata)).toEqual({ field, message });
  });

  it('refuses a schema zod cannot read (a dangling $ref, a bad pattern)', () => {
    expect(extractionRulesProblem({ extract: { schema: { type: 'object', properties: { a: { $ref: '#/nope' } } } } })?.message).toContain('#/nope');
    expect(extractionRulesProblem({ extract: { schema: { type: 'object', properties: { a: { type: 'string', pattern: '(' } } } } })?.message).toContain(
      'Invalid regular expression',
    );
  });
});

describe('jsonObjectIn', () => {
  it('finds the object in a bare answer, a fenced block or prose', () => {
    expect(jsonObjectIn('{"a":1}')).toEqual({ a: 1 });
    expect(jsonObjectIn('Here:\n```json\n{"a":2}\n```\nDone.')).toEqual({ a: 2 });
    expect(jsonObjectIn('The result is {"a":3} as asked.')).toEqual({ a: 3 });
    expect(jsonObjectIn('[1,2]')).toBeUndefined();
    expect(jsonObjectIn('no json here')).toBeUndefined();
  });
});

describe('validateExtraction', () => {
  it('gives the object when it matches, else the issues by path', () => {
    expect(validateExtraction({ schema }, '{"sentiment":"positive","score":7}')).toEqual({ metadata: { sentiment: 'positive', score: 7 } });
    const bad = validateExtraction({ schema }, '{"sentiment":"meh","score":11}');
    expect('issues' in bad && bad.issues.map((issue) => issue.split(':')[0])).toEqual(['sentiment', 'score']);
    expect(validateExtraction({ schema }, 'The customer is happy.')).toEqual({ issues: ['the answer holds no JSON object'] });
  });
});
