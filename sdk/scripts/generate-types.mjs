#!/usr/bin/env node
/**
 * Writes src/generated/openapi.ts from the OpenAPI document a Berth server serves
 * (`/v1/openapi.json`): one exported type per component schema, and `paths`, each operation's
 * path and query parameters, request body and responses by status. Plain JavaScript with no
 * dependencies, so it runs wherever Node does (ADR 43 says why not openapi-typescript).
 *
 *   node sdk/scripts/generate-types.mjs http://127.0.0.1:8080/v1/openapi.json   # or a file
 *   node sdk/scripts/generate-types.mjs <url or file> --check                    # exit 1 on drift
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const GENERATED_FILE = join(dirname(fileURLToPath(import.meta.url)), '..', 'src', 'generated', 'openapi.ts');

const COMPONENT = '#/components/schemas/';
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function key(name) {
  return IDENTIFIER.test(name) ? name : JSON.stringify(name);
}

function comment(text, indent) {
  if (!text) return '';
  const lines = String(text).replace(/\*\//g, '*\\/').split('\n');
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((line) => `${indent} * ${line}`.trimEnd()).join('\n')}\n${indent} */\n`;
}

function literal(value) {
  return JSON.stringify(value);
}

/** A JSON Schema (the subset zod and the route table write) as a TypeScript type. */
export function typeOf(schema, indent = '') {
  if (schema === true || schema === undefined || schema === null) return 'unknown';
  if (schema === false) return 'never';
  if (schema.$ref) {
    if (!schema.$ref.startsWith(COMPONENT)) throw new Error(`cannot follow ${schema.$ref}`);
    return schema.$ref.slice(COMPONENT.length);
  }
  if ('const' in schema) return literal(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.map(literal).join(' | ');
  if (schema.anyOf || schema.oneOf) return union((schema.anyOf ?? schema.oneOf).map((part) => typeOf(part, indent)));
  if (schema.allOf) return schema.allOf.map((part) => wrap(typeOf(part, indent))).join(' & ');
  if (Array.isArray(schema.type)) return union(schema.type.map((type) => typeOf({ ...schema, type }, indent)));
  switch (schema.type) {
    case 'string':
      return 'string';
    case 'integer':
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array':
      if (Array.isArray(schema.prefixItems)) return `[${schema.prefixItems.map((item) => typeOf(item, indent)).join(', ')}]`;
      return `${wrap(typeOf(schema.items, indent))}[]`;
    case 'object':
      return objectType(schema, indent);
    default:
      if (schema.properties || schema.additionalProperties !== undefined) return objectType(schema, indent);
      return 'unknown';
  }
}

function union(types) {
  const unique = [...new Set(types)];
  return unique.includes('unknown') ? 'unknown' : unique.join(' | ');
}

function wrap(type) {
  return /[|&\s]/.test(type) && !/^[{[(]/.test(type) ? `(${type})` : type;
}

function objectType(schema, indent) {
  const inner = `${indent}  `;
  const required = new Set(schema.required ?? []);
  const members = Object.entries(schema.properties ?? {}).map(
    ([name, property]) => `${comment(property.description, inner)}${inner}${key(name)}${required.has(name) ? '' : '?'}: ${typeOf(property, inner)};\n`,
  );
  const extra = schema.additionalProperties;
  if (extra !== undefined && extra !== false) {
    // A record whose named fields are also listed: their types join the index signature's.
    const valueType = typeOf(extra, inner);
    const named = Object.values(schema.properties ?? {}).map((property) => typeOf(property, inner));
    members.push(`${inner}[key: string]: ${named.length ? union([valueType, ...named, 'undefined']) : valueType};\n`);
  } else if (members.length === 0 && extra === undefined) {
    members.push(`${inner}[key: string]: unknown;\n`);
  }
  return members.length ? `{\n${members.join('')}${indent}}` : 'Record<string, never>';
}

function parametersType(parameters, where, indent) {
  const chosen = (parameters ?? []).filter((parameter) => parameter.in === where);
  if (chosen.length === 0) return 'never';
  const inner = `${indent}  `;
  return `{\n${chosen
    .map((parameter) => `${comment(parameter.description, inner)}${inner}${key(parameter.name)}${parameter.required ? '' : '?'}: ${typeOf(parameter.schema, inner)};\n`)
    .join('')}${indent}}`;
}

function contentType(content, indent) {
  if (!content) return 'never';
  const json = Object.entries(content).find(([type]) => type.includes('json'));
  if (json) return typeOf(json[1].schema, indent);
  const [, first] = Object.entries(content)[0] ?? [];
  return first?.schema?.type === 'string' || first?.schema === undefined ? 'string' : typeOf(first.schema, indent);
}

/** The TypeScript module for an OpenAPI document, as text. */
export function generateTypes(document) {
  const out = [
    '/**',
    ' * Generated from the OpenAPI document Berth serves at /v1/openapi.json by',
    ' * sdk/scripts/generate-types.mjs. Do not edit: run `make sdk-types` (a test fails when it is stale).',
    ' */',
    '/* eslint-disable */',
    '',
    `/** The document's version (\`info.version\`). */`,
    `export const API_VERSION = ${literal(document.info?.version ?? '')};`,
    '',
  ];
  const schemas = document.components?.schemas ?? {};
  for (const name of Object.keys(schemas).sort()) {
    out.push(`${comment(schemas[name].description, '')}export type ${name} = ${typeOf(schemas[name], '')};`, '');
  }
  out.push('/** Every route: path and query parameters, the JSON body, and each response\'s body by status. */', 'export interface paths {');
  for (const path of Object.keys(document.paths ?? {}).sort()) {
    out.push(`  ${literal(path)}: {`);
    for (const [method, operation] of Object.entries(document.paths[path])) {
      if (!['get', 'put', 'post', 'patch', 'delete'].includes(method)) continue;
      const indent = '      ';
      out.push(`${comment(operation.summary, '    ')}    ${method}: {`);
      out.push(`${indent}operationId: ${literal(operation.operationId ?? '')};`);
      out.push(`${indent}path: ${parametersType(operation.parameters, 'path', indent)};`);
      out.push(`${indent}query: ${parametersType(operation.parameters, 'query', indent)};`);
      out.push(`${indent}body: ${contentType(operation.requestBody?.content, indent)};`);
      out.push(`${indent}responses: {`);
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        out.push(`${indent}  ${status}: ${contentType(response.content, `${indent}  `)};`);
      }
      out.push(`${indent}};`, '    };');
    }
    out.push('  };');
  }
  out.push('}', '');
  return out.join('\n');
}

async function readDocument(source) {
  if (/^https?:\/\//.test(source)) {
    const response = await fetch(source);
    if (!response.ok) throw new Error(`${source} answered ${response.status}`);
    return response.json();
  }
  return JSON.parse(readFileSync(source, 'utf8'));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [source, flag] = process.argv.slice(2);
  if (!source) {
    process.stderr.write('usage: generate-types.mjs <url of /v1/openapi.json, or a file> [--check]\n');
    process.exit(2);
  }
  const text = generateTypes(await readDocument(source));
  if (flag === '--check') {
    const current = readFileSync(GENERATED_FILE, 'utf8');
    if (current !== text) {
      process.stderr.write(`${GENERATED_FILE} is stale: regenerate it with make sdk-types\n`);
      process.exit(1);
    }
    process.stdout.write('sdk types match the served document\n');
  } else {
    writeFileSync(GENERATED_FILE, text);
    process.stdout.write(`wrote ${GENERATED_FILE}\n`);
  }
}
