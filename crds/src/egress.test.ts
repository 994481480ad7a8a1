import { describe, expect, it } from 'vitest';
import { egressCidrProblem, egressHostCovered, egressHostMatches, egressHostProblem, egressSchema } from './egress.js';

describe('egress host patterns', () => {
  it.each([
    ['api.github.com', undefined],
    ['*.github.com', undefined],
    ['localhost', undefined],
    ['a-b.c0.example', undefined],
    ['API.github.com', 'must be a lowercase DNS name (api.github.com) or a wildcard below one (*.github.com)'],
    ['*github.com', 'must be a lowercase DNS name (api.github.com) or a wildcard below one (*.github.com)'],
    ['api.*.com', 'must be a lowercase DNS name (api.github.com) or a wildcard below one (*.github.com)'],
    ['*', 'must be a lowercase DNS name (api.github.com) or a wildcard below one (*.github.com)'],
    ['-bad.com', 'must be a lowercase DNS name (api.github.com) or a wildcard below one (*.github.com)'],
    ['https://github.com', 'must be a lowercase DNS name (api.github.com) or a wildcard below one (*.github.com)'],
    ['10.0.0.1', 'an IP address goes in cidrs (as 192.0.2.7/32)'],
  ])('%s', (pattern, problem) => expect(egressHostProblem(pattern)).toBe(problem));

  it('matches a name exactly, and a wildcard only below its name', () => {
    expect(egressHostMatches('api.github.com', 'API.GitHub.com.')).toBe(true);
    expect(egressHostMatches('api.github.com', 'github.com')).toBe(false);
    expect(egressHostMatches('*.github.com', 'api.github.com')).toBe(true);
    expect(egressHostMatches('*.github.com', 'a.b.github.com')).toBe(true);
    expect(egressHostMatches('*.github.com', 'github.com')).toBe(false);
    expect(egressHostMatches('*.github.com', 'evilgithub.com')).toBe(false);
  });

  it('knows which credential hosts an allow-list covers', () => {
    expect(egressHostCovered('api.github.com', ['*.github.com'])).toBe(true);
    expect(egressHostCovered('*.api.github.com', ['*.github.com'])).toBe(true);
    expect(egressHostCovered('*.github.com', ['*.github.com'])).toBe(true);
    expect(egressHostCovered('*.github.com', ['api.github.com'])).toBe(false);
    expect(egressHostCovered('github.com', ['*.github.com'])).toBe(false);
  });
});

describe('egress networks', () => {
  it.each([
    ['10.0.0.0/8', undefined],
    ['192.0.2.7/32', undefined],
    ['2001:db8::/32', undefined],
    ['10.0.0.0', 'must be a network with its prefix length, such as 192.0.2.0/24 or 192.0.2.7/32'],
    ['10.0.0.0/33', 'the prefix length must be 0 to 32'],
    ['2001:db8::/129', 'the prefix length must be 0 to 128'],
    ['10.0.0.0/-1', 'the prefix length must be 0 to 32'],
    ['example.com/24', '"example.com" is not an IPv4 or IPv6 address'],
  ])('%s', (cidr, problem) => expect(egressCidrProblem(cidr)).toBe(problem));
});

describe('egress policy', () => {
  it('fills defaults and names the field of a credential whose host is not allowed', () => {
    expect(egressSchema.parse({ hosts: ['api.github.com'], credentials: [{ host: 'api.github.com', secret: 'GITHUB_TOKEN' }] })).toEqual({
      hosts: ['api.github.com'],
      cidrs: [],
      credentials: [{ host: 'api.github.com', secret: 'GITHUB_TOKEN', header: 'Authorization', prefix: 'Bearer ' }],
    });
    const result = egressSchema.safeParse({ hosts: ['pypi.org'], credentials: [{ host: 'api.github.com', secret: 'GITHUB_TOKEN' }] });
    expect(result.success).toBe(false);
    expect(result.error!.issues.map((issue) => [issue.path.join('.'), issue.message])).toEqual([
      ['credentials.0.host', 'api.github.com is not allowed by hosts: add it there'],
    ]);
  });
});
