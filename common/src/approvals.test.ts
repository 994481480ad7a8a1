import { describe, expect, it } from 'vitest';
import { approvalPolicySchema, approvalRuleFor, approvalTtlSeconds, maskedPreview } from './approvals.js';

describe('approval policies', () => {
  const policy = approvalPolicySchema.parse({
    rules: [{ tool: 'exec', when: { code: 'rm\\s+-rf|curl' } }, { tool: 'browser_*' }, { tool: 'write_file', when: { path: '^/etc/' } }],
    ttl: '30m',
  });
  it.each([
    [{ name: 'exec', input: { language: 'bash', code: 'rm -rf /workspace' } }, 0],
    [{ name: 'exec', input: { language: 'bash', code: 'ls' } }, undefined],
    [{ name: 'browser_click', input: { selector: 'a' } }, 1],
    [{ name: 'browser', input: {} }, undefined],
    [{ name: 'write_file', input: { path: '/etc/passwd', content: '' } }, 2],
    [{ name: 'write_file', input: { content: '/etc/' } }, undefined],
    [{ name: 'read_file', input: { path: '/etc/passwd' } }, undefined],
  ])('%j → rule %s', (call, rule) => expect(approvalRuleFor(policy, call)).toBe(rule));

  it('defaults the TTL to an hour', () => {
    expect(approvalTtlSeconds(approvalPolicySchema.parse({ rules: [{ tool: '*' }] }))).toBe(3600);
    expect(approvalTtlSeconds(policy)).toBe(1800);
  });

  it.each([
    [{ rules: [] }, 'rules'],
    [{ rules: [{ tool: 'exec', when: { code: '(' } }] }, 'not a valid regular expression'],
    [{ rules: [{ tool: 'ex ec' }] }, 'glob'],
    [{ rules: [{ tool: 'exec' }], ttl: '200h' }, 'between 1s and 168h'],
    [{ rules: [{ tool: 'exec' }], ttl: 'soon' }, 'duration'],
    [{ rules: [{ tool: 'exec' }], extra: 1 }, 'extra'],
  ])('refuses %j', (input, problem) => {
    const parsed = approvalPolicySchema.safeParse(input);
    expect(parsed.success).toBe(false);
    expect(JSON.stringify(parsed.error?.issues)).toContain(problem);
  });
});

describe('maskedPreview', () => {
  it('masks every secret value the agent holds, longest first, deep in the input', () => {
    const secrets = { API_TOKEN: 'tok_abcdef123456', SHORT: 'on', PREFIX: 'tok_abc' };
    expect(maskedPreview({ code: 'curl -H "x: tok_abcdef123456" && echo tok_abc', list: ['tok_abcdef123456'], n: 3, flag: 'on' }, secrets)).toEqual({
      code: 'curl -H "x: [secret:API_TOKEN]" && echo [secret:PREFIX]',
      list: ['[secret:API_TOKEN]'],
      n: 3,
      flag: 'on',
    });
  });
});
