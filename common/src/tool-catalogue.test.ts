import { describe, expect, it } from 'vitest';
import { TOOL_NAMES, toolListProblem } from './tool-catalogue.js';

describe('toolListProblem', () => {
  it('accepts known tools, and browser tools on a browser agent', () => {
    expect(toolListProblem(['exec', 'read_file'], false)).toBeUndefined();
    expect(toolListProblem(['exec', 'browser_click'], true)).toBeUndefined();
    expect(toolListProblem([], false)).toBeUndefined();
  });

  it('names unknown tools and lists the valid ones', () => {
    expect(toolListProblem(['exec', 'teleport', 'toString'], false)).toBe(`unknown tools teleport, toString; valid tools: ${TOOL_NAMES.join(', ')}`);
  });

  it('refuses tools that a field of the agent offers', () => {
    expect(toolListProblem(['exec', 'knowledge_search'], false)).toBe("knowledge_search is offered by the agent's knowledge field, not named in tools");
  });

  it('refuses browser tools on an agent without a browser', () => {
    expect(toolListProblem(['browser_text'], false)).toBe('browser_text needs a browser agent (browser: true)');
    expect(toolListProblem(['browser_text', 'browser_type'], false)).toBe('browser_text, browser_type need a browser agent (browser: true)');
  });
});
