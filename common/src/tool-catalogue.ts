/**
 * The tools an agent may name in its `tools` list. The API server validates a list against
 * this catalogue; the operator's runner implements each of these tools (its unit test checks
 * that the two agree), so an agent accepted here never names a tool the runner lacks.
 */
export const TOOL_CATALOGUE = {
  exec: { needsBrowser: false },
  read_file: { needsBrowser: false },
  write_file: { needsBrowser: false },
  list_files: { needsBrowser: false },
  browser_navigate: { needsBrowser: true },
  browser_screenshot: { needsBrowser: true },
  browser_click: { needsBrowser: true },
  browser_type: { needsBrowser: true },
  browser_text: { needsBrowser: true },
} as const satisfies Record<string, { needsBrowser: boolean }>;

export type ToolName = keyof typeof TOOL_CATALOGUE;

export const TOOL_NAMES = Object.keys(TOOL_CATALOGUE) as ToolName[];

export function isToolName(name: string): name is ToolName {
  return Object.hasOwn(TOOL_CATALOGUE, name);
}

/**
 * Tools an agent gets from a field of its own rather than from `tools`: the runner offers each
 * when that field is set (its unit test checks that it implements them).
 */
export const FIELD_TOOLS = {
  knowledge_search: { field: 'knowledge' },
} as const satisfies Record<string, { field: string }>;

/** Why an agent's `tools` list is not acceptable, or undefined when it is. */
export function toolListProblem(tools: readonly string[], browser: boolean): string | undefined {
  const byField = tools.filter((name) => Object.hasOwn(FIELD_TOOLS, name));
  if (byField.length > 0) {
    return byField.map((name) => `${name} is offered by the agent's ${FIELD_TOOLS[name as keyof typeof FIELD_TOOLS].field} field, not named in tools`).join('; ');
  }
  const unknown = tools.filter((name) => !isToolName(name));
  if (unknown.length > 0) return `unknown tool${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; valid tools: ${TOOL_NAMES.join(', ')}`;
  const browserOnly = tools.filter((name) => TOOL_CATALOGUE[name as ToolName].needsBrowser);
  if (browserOnly.length > 0 && !browser) return `${browserOnly.join(', ')} need${browserOnly.length > 1 ? '' : 's'} a browser agent (browser: true)`;
  return undefined;
}
