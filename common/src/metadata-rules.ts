import { z } from 'zod';

/**
 * An agent's `metadata`: extraction rules under the reserved key `extract`, and custom pairs
 * (every other key). The rules are a JSON schema of an object that a completed run's output
 * must yield; the runner validates what the model answered against it (zod's JSON-schema
 * reader, see ADR 0036) and keeps the result on the task and in `agent.completed`.
 */
export const EXTRACT_KEY = 'extract';

export interface ExtractionRules {
  /** JSON schema of the object to extract; its top level is `type: object`. */
  schema: Record<string, unknown>;
  /** Extra guidance for the model (what a field means), sent with the request for JSON. */
  instructions?: string;
}

const JSON_SCHEMA_TYPES = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'];

/** Structural checks zod's reader does not make (it skips a `properties` that is not an object). */
function schemaShapeProblem(schema: unknown, path: string, depth = 0): string | undefined {
  if (depth > 8) return `${path}: nested too deep (at most 8 levels)`;
  if (typeof schema === 'boolean') return undefined;
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return `${path}: must be a JSON schema object`;
  const record = schema as Record<string, unknown>;
  const types = record.type === undefined ? [] : Array.isArray(record.type) ? record.type : [record.type];
  for (const type of types) if (typeof type !== 'string' || !JSON_SCHEMA_TYPES.includes(type)) return `${path}.type: unknown type ${JSON.stringify(type)}`;
  if (record.properties !== undefined) {
    if (typeof record.properties !== 'object' || record.properties === null || Array.isArray(record.properties)) return `${path}.properties: must be an object`;
    for (const [name, inner] of Object.entries(record.properties)) {
      const problem = schemaShapeProblem(inner, `${path}.properties.${name}`, depth + 1);
      if (problem) return problem;
    }
  }
  if (record.required !== undefined && (!Array.isArray(record.required) || record.required.some((name) => typeof name !== 'string'))) {
    return `${path}.required: must be a list of property names`;
  }
  if (record.items !== undefined) return schemaShapeProblem(record.items, `${path}.items`, depth + 1);
  return undefined;
}

/** The validator of an extraction schema, or why the schema is not acceptable. */
export function compileExtractionSchema(schema: unknown, path = `metadata.${EXTRACT_KEY}.schema`): { validator: z.ZodType } | { problem: string } {
  const shape = schemaShapeProblem(schema, path);
  if (shape) return { problem: shape };
  if ((schema as Record<string, unknown>).type !== 'object') return { problem: `${path}.type: must be "object" (the run yields an object of fields)` };
  try {
    return { validator: z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]) };
  } catch (error) {
    return { problem: `${path}: ${(error as Error).message}` };
  }
}

/**
 * The extraction rules of an agent's `metadata`, or undefined when it has none; throws nothing:
 * `extractionRulesProblem` is the check made when the agent is created.
 */
export function extractionRulesOf(metadata: Record<string, unknown> | undefined): ExtractionRules | undefined {
  const rules = metadata?.[EXTRACT_KEY];
  if (typeof rules !== 'object' || rules === null) return undefined;
  const { schema, instructions } = rules as Record<string, unknown>;
  return { schema: schema as Record<string, unknown>, ...(typeof instructions === 'string' ? { instructions } : {}) };
}

/** Why an agent's `metadata.extract` is not acceptable (field path and message), or undefined. */
export function extractionRulesProblem(metadata: Record<string, unknown> | undefined): { field: string; message: string } | undefined {
  if (metadata === undefined || !(EXTRACT_KEY in metadata)) return undefined;
  const rules = metadata[EXTRACT_KEY];
  const field = `metadata.${EXTRACT_KEY}`;
  if (typeof rules !== 'object' || rules === null || Array.isArray(rules)) return { field, message: 'must be an object: { schema, instructions? }' };
  const unknown = Object.keys(rules).filter((key) => key !== 'schema' && key !== 'instructions');
  if (unknown.length > 0) return { field, message: `unknown keys ${unknown.join(', ')}; give schema and optionally instructions` };
  const { schema, instructions } = rules as Record<string, unknown>;
  if (instructions !== undefined && (typeof instructions !== 'string' || instructions.length > 4000)) {
    return { field: `${field}.instructions`, message: 'must be a string of at most 4000 characters' };
  }
  if (schema === undefined) return { field: `${field}.schema`, message: 'required: the JSON schema of the object to extract' };
  const compiled = compileExtractionSchema(schema);
  if ('problem' in compiled) return { field: `${field}.schema`, message: compiled.problem };
  return undefined;
}

/** The JSON object a model's answer holds: the whole text, or a fenced ```json block in it, or its outermost braces. */
export function jsonObjectIn(text: string): Record<string, unknown> | undefined {
  const candidates = [text.trim()];
  const fenced = /```(?:json)?\s*\n([\s\S]*?)```/i.exec(text);
  if (fenced) candidates.push(fenced[1]!.trim());
  const first = text.indexOf('{');
  const last = text.lastIndexOf('}');
  if (first !== -1 && last > first) candidates.push(text.slice(first, last + 1));
  for (const candidate of candidates) {
    try {
      const value: unknown = JSON.parse(candidate);
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    } catch {
      // the next candidate
    }
  }
  return undefined;
}

/** Validates an answer against the rules: the object, or the issues (path: message). */
export function validateExtraction(rules: ExtractionRules, text: string): { metadata: Record<string, unknown> } | { issues: string[] } {
  const compiled = compileExtractionSchema(rules.schema);
  if ('problem' in compiled) return { issues: [compiled.problem] };
  const value = jsonObjectIn(text);
  if (value === undefined) return { issues: ['the answer holds no JSON object'] };
  const result = compiled.validator.safeParse(value);
  if (result.success) return { metadata: result.data as Record<string, unknown> };
  return { issues: result.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`) };
}

/** Custom pairs become labels of the agent under this prefix, so lists can filter by them. */
export const METADATA_LABEL_PREFIX = 'metadata.berth.dev/';
/** What a Kubernetes label name (after the prefix) and value can hold; other pairs are kept, not labelled. */
const LABEL_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

export function isLabelSafe(text: string): boolean {
  return LABEL_PART.test(text);
}

/** The labels of an agent's custom pairs: each string pair whose key and value a label can hold. */
export function metadataLabels(metadata: Record<string, unknown> | undefined): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (key === EXTRACT_KEY || typeof value !== 'string' || !isLabelSafe(key) || !isLabelSafe(value)) continue;
    labels[`${METADATA_LABEL_PREFIX}${key}`] = value;
  }
  return labels;
}
