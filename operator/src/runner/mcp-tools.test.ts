import { describe, expect, it } from 'vitest';
import { MCP_RESULT_LIMIT, mcpResultText, mcpToolName } from './mcp-tools.js';
import { TOOL_OUTPUT_LIMIT } from './tools.js';

describe('mcpResultText', () => {
  it('joins text parts and names the others', () => {
    expect(mcpResultText([{ type: 'text', text: 'one' }, { type: 'image', mimeType: 'image/png', data: 'x' }, { type: 'text', text: 'two' }])).toBe(
      'one\n[image content (image/png) not shown]\ntwo',
    );
    expect(mcpResultText(undefined)).toBe('');
  });

  it('cuts a long result below the loop limit, with a marker saying how much is missing', () => {
    const text = mcpResultText([{ type: 'text', text: 'x'.repeat(MCP_RESULT_LIMIT + 1000) }]);
    expect(text.length).toBeLessThanOrEqual(TOOL_OUTPUT_LIMIT);
    expect(text.endsWith('\n[MCP result truncated: 1000 more characters not shown]')).toBe(true);
  });
});

describe('mcpToolName', () => {
  it('namespaces a tool by its server', () => {
    expect(mcpToolName('crm', 'lookup_customer')).toBe('mcp__crm__lookup_customer');
  });
});
