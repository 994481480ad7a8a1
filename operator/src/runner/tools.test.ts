import { FIELD_TOOLS, TOOL_CATALOGUE, silentLogger, type Resource } from '@berth/common';
import { describe, expect, it } from 'vitest';
import { TOOLS } from './tools.js';
import { knowledgeSearchTool } from './knowledge-tool.js';

describe('TOOLS', () => {
  it('implements exactly the catalogue the API server validates agents against', () => {
    expect([...TOOLS.keys()].sort()).toEqual(Object.keys(TOOL_CATALOGUE).sort());
    for (const [name, spec] of TOOLS) {
      expect(spec.needsBrowser, name).toBe(TOOL_CATALOGUE[name as keyof typeof TOOL_CATALOGUE].needsBrowser);
    }
  });
});

describe('FIELD_TOOLS', () => {
  it('are the tools the runner builds from agent fields, and none of them is in the catalogue', () => {
    const agent = { spec: { knowledge: true, organizationId: 'org_x', mode: 'live', sessionId: 'ses_x' } } as unknown as Resource<'Agent'>;
    // Building a tool reads nothing: the database is first used when the tool runs (covered end to end).
    const built = [knowledgeSearchTool(null as never, agent, () => undefined, { log: silentLogger })];
    expect(built.map((tool) => tool.name)).toEqual(Object.keys(FIELD_TOOLS));
    for (const name of Object.keys(FIELD_TOOLS)) expect(Object.hasOwn(TOOL_CATALOGUE, name)).toBe(false);
  });
});
