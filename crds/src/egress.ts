import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * A host an agent's sandbox may reach: a DNS name (`api.github.com`), or a wildcard that matches
 * any name below one (`*.github.com` matches `api.github.com` and `a.b.github.com`, not
 * `github.com`). Lowercase labels of letters, digits and `-`, at most 253 characters.
 */
export const EGRESS_HOST_PATTERN = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Why `pattern` is not an egress host pattern, or undefined when it is one. Pure. */
export function egressHostProblem(pattern: string): string | undefined {
  if (pattern.length > 253) return 'at most 253 characters';
  if (isIP(pattern) !== 0) return 'an IP address goes in cidrs (as 192.0.2.7/32)';
  if (!EGRESS_HOST_PATTERN.test(pattern)) return 'must be a lowercase DNS name (api.github.com) or a wildcard below one (*.github.com)';
  return undefined;
}

/** Why `cidr` is not an IPv4 or IPv6 network (`10.1.0.0/16`, `2001:db8::/32`), or undefined when it is one. Pure. */
export function egressCidrProblem(cidr: string): string | undefined {
  const slash = cidr.indexOf('/');
  if (slash < 0) return 'must be a network with its prefix length, such as 192.0.2.0/24 or 192.0.2.7/32';
  const address = cidr.slice(0, slash);
  const prefixText = cidr.slice(slash + 1);
  const family = isIP(address);
  if (family === 0) return `"${address}" is not an IPv4 or IPv6 address`;
  const max = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) return `the prefix length must be 0 to ${max}`;
  return undefined;
}

/**
 * Whether `host` (a DNS name, any case, perhaps with a trailing dot) matches `pattern`: equal, or
 * below the name of a `*.` wildcard. Pure.
 */
export function egressHostMatches(pattern: string, host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  if (!pattern.startsWith('*.')) return name === pattern;
  return name.endsWith(pattern.slice(1)) && name.length > pattern.length - 1;
}

/** Whether every host `pattern` matches is matched by one of `hosts`. Pure. */
export function egressHostCovered(pattern: string, hosts: readonly string[]): boolean {
  if (!pattern.startsWith('*.')) return hosts.some((allowed) => egressHostMatches(allowed, pattern));
  const below = pattern.slice(2);
  return hosts.some((allowed) => allowed === pattern || (allowed.startsWith('*.') && egressHostMatches(allowed, below)));
}

const hostPattern = z
  .string()
  .max(253)
  .superRefine((value, context) => {
    const problem = egressHostProblem(value);
    if (problem) context.addIssue({ code: 'custom', message: problem });
  });

const cidr = z
  .string()
  .max(64)
  .superRefine((value, context) => {
    const problem = egressCidrProblem(value);
    if (problem) context.addIssue({ code: 'custom', message: problem });
  });

/** An HTTP header name (RFC 9110 token). */
const headerName = z.string().min(1).max(128).regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name');

/**
 * A secret the egress proxy adds to the requests to `host`, as `header: <prefix><value>`: the value
 * never enters the sandbox. Only over HTTPS, which the proxy terminates with the sandbox's own CA.
 */
export const egressCredentialSchema = z
  .object({
    host: hostPattern.describe('the host (or wildcard) whose requests get the header; it must be allowed by `hosts`'),
    secret: z
      .string()
      .max(128)
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a secret name: letters, digits and _, not starting with a digit')
      .describe('the name of a secret of the organization or the session (`POST /v1/secrets`)'),
    header: headerName.default('Authorization').describe('the header to set (replacing one the sandbox sent); default Authorization'),
    prefix: z.string().max(64).regex(/^[\x20-\x7e]*$/, 'printable ASCII only').default('Bearer ').describe('written before the value; default "Bearer "'),
  })
  .strict();
export type EgressCredential = z.infer<typeof egressCredentialSchema>;

/**
 * Where an agent's sandbox may connect, through the egress proxy: everything else is refused.
 * An address a name resolves to that is private, loopback or link-local is refused unless it is
 * also inside one of `cidrs`.
 */
export const egressSchema = z
  .object({
    hosts: z.array(hostPattern).max(256).default([]).describe('DNS names, or wildcards such as *.github.com, the sandbox may reach'),
    cidrs: z.array(cidr).max(256).default([]).describe('networks (IPv4 or IPv6, with a prefix length) the sandbox may reach by address'),
    credentials: z.array(egressCredentialSchema).max(64).default([]).describe('secrets the proxy adds to requests to a host'),
  })
  .strict()
  .superRefine((egress, context) => {
    egress.credentials.forEach((credential, index) => {
      if (egressHostProblem(credential.host) === undefined && !egressHostCovered(credential.host, egress.hosts)) {
        context.addIssue({ code: 'custom', path: ['credentials', index, 'host'], message: `${credential.host} is not allowed by hosts: add it there` });
      }
    });
  });
export type Egress = z.infer<typeof egressSchema>;
