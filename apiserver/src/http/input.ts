import { ApiError } from '@berth/common';

/** Deeper than any schema of this API reaches; bounds the work of every later step. */
export const MAX_INPUT_DEPTH = 32;

/**
 * Checks what a request carries before any schema sees it: text must be text that PostgreSQL
 * and the sandboxes can hold (no NUL, no lone UTF-16 surrogate), and nesting is bounded.
 * Walks iteratively, so no input can overflow the stack. Problems are named by field path,
 * as a 422 from a schema would name them.
 */
export function inspectInput(value: unknown, location: 'body' | 'query' | 'params'): void {
  const fields: Record<string, string[]> = {};
  const report = (path: string, problem: string) => {
    const list = (fields[path || location] ??= []);
    if (!list.includes(problem)) list.push(problem);
  };
  const stack: { node: unknown; path: string; depth: number }[] = [{ node: value, path: '', depth: 0 }];
  while (stack.length > 0 && Object.keys(fields).length < 20) {
    const { node, path, depth } = stack.pop()!;
    if (typeof node === 'string') {
      const problem = textProblem(node);
      if (problem) report(path, problem);
      continue;
    }
    if (node === null || typeof node !== 'object') continue;
    if (depth >= MAX_INPUT_DEPTH) {
      report(path, `nested deeper than ${MAX_INPUT_DEPTH} levels`);
      continue;
    }
    for (const [key, child] of Object.entries(node)) {
      const childPath = path ? `${path}.${key}` : key;
      const keyProblem = textProblem(key);
      if (keyProblem) report(childPath, `key ${keyProblem}`);
      stack.push({ node: child, path: childPath, depth: depth + 1 });
    }
  }
  if (Object.keys(fields).length === 0) return;
  const summary = Object.entries(fields)
    .map(([field, problems]) => `${field}: ${problems.join('; ')}`)
    .join(', ');
  throw new ApiError('unprocessable_entity', `invalid ${location === 'params' ? 'path' : location}: ${summary}`, { fields });
}

// A high surrogate not followed by a low one, or a low one not preceded by a high one (code units, no `u` flag).
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function textProblem(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain NUL characters (\\u0000)';
  if (LONE_SURROGATE.test(text)) return 'must be valid Unicode text (it holds a lone surrogate)';
  return undefined;
}
