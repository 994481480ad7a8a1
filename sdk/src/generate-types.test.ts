import { describe, expect, it } from 'vitest';
import { generateTypes, typeOf } from '../scripts/generate-types.mjs';

describe('the type generator (JSON Schema as the route table writes it → TypeScript)', () => {
  it.each([
    [{ type: 'string' }, 'string'],
    [{ type: 'integer', minimum: 0 }, 'number'],
    [{ type: 'boolean' }, 'boolean'],
    [{ type: ['string', 'null'] }, 'string | null'],
    [{ anyOf: [{ type: 'integer' }, { type: 'null' }] }, 'number | null'],
    [{ type: 'string', enum: ['idle', 'running'] }, '"idle" | "running"'],
    [{ type: 'boolean', const: true }, 'true'],
    [{ $ref: '#/components/schemas/Agent' }, 'Agent'],
    [{ type: 'array', items: { $ref: '#/components/schemas/Agent' } }, 'Agent[]'],
    [{ type: 'array', items: { type: ['string', 'null'] } }, '(string | null)[]'],
    [{ type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }] }, '[string, number]'],
    [{ allOf: [{ $ref: '#/components/schemas/A' }, { $ref: '#/components/schemas/B' }] }, 'A & B'],
    [{}, 'unknown'],
    [{ anyOf: [{ type: 'string' }, {}] }, 'unknown'],
  ])('%j is %s', (schema, type) => {
    expect(typeOf(schema)).toBe(type);
  });

  it('writes objects with required and optional fields, records, and descriptions as comments', () => {
    expect(typeOf({ type: 'object', properties: { id: { type: 'string', description: '`agt_…`' }, gpu: { type: 'string' } }, required: ['id'], additionalProperties: false })).toBe(
      '{\n  /** `agt_…` */\n  id: string;\n  gpu?: string;\n}',
    );
    expect(typeOf({ type: 'object', additionalProperties: { type: 'string' } })).toBe('{\n  [key: string]: string;\n}');
    expect(typeOf({ type: 'object' })).toBe('{\n  [key: string]: unknown;\n}');
    expect(typeOf({ type: 'object', properties: {}, additionalProperties: false })).toBe('Record<string, never>');
  });

  it('refuses a reference it cannot follow rather than guessing', () => {
    expect(() => typeOf({ $ref: 'https://example.com/schema.json' })).toThrow(/cannot follow/);
  });

  it('writes components and each operation: parameters, body and answers by status', () => {
    const text = generateTypes({
      info: { version: '9.9.9' },
      components: { schemas: { Ok: { type: 'object', properties: { ok: { const: true } }, required: ['ok'], additionalProperties: false, description: 'fine' } } },
      paths: {
        '/v1/things/{id}': {
          post: {
            operationId: 'makeThing',
            summary: 'Make a thing',
            parameters: [
              { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
              { name: 'dry', in: 'query', required: false, schema: { type: 'string' } },
            ],
            requestBody: { content: { 'application/json': { schema: { type: 'object', properties: { n: { type: 'integer' } }, additionalProperties: false } } } },
            responses: { '201': { content: { 'application/json': { schema: { $ref: '#/components/schemas/Ok' } } } }, '204': { description: 'nothing' } },
          },
        },
      },
    });
    expect(text).toContain('export const API_VERSION = "9.9.9";');
    expect(text).toContain('/** fine */\nexport type Ok = {\n  ok: true;\n};');
    expect(text).toContain('operationId: "makeThing";');
    expect(text).toContain('path: {\n        id: string;\n      };');
    expect(text).toContain('query: {\n        dry?: string;\n      };');
    expect(text).toContain('body: {\n        n?: number;\n      };');
    expect(text).toContain('201: Ok;');
    expect(text).toContain('204: never;');
  });
});
