import { randomBytes } from 'node:crypto';
import { ApiError } from '@berth/common';
import { describe, expect, it } from 'vitest';
import { ConnectError, parseEnvelopes, toConnectError } from './connect.js';
import { agentIdOf, E2bError, sandboxIdOf } from './control-plane.js';
import { endEvent, shellQuote } from './process.js';
import { berthKeyOf } from './surface.js';
import { EnvdTokens } from './tokens.js';

function envelope(flags: number, message: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(message));
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

describe('the Connect protocol framing', () => {
  it('reads every enveloped message of a body', () => {
    const body = Buffer.concat([envelope(0, { start: { process: { pid: 7 } } }), envelope(0, { data: { input: { pty: 'aGk=' } } })]);
    expect(parseEnvelopes(body)).toEqual([{ start: { process: { pid: 7 } } }, { data: { input: { pty: 'aGk=' } } }]);
  });

  it('refuses a truncated envelope, a compressed one and one that is not JSON', () => {
    expect(() => parseEnvelopes(envelope(0, { a: 1 }).subarray(0, 8))).toThrow(/truncated/);
    expect(() => parseEnvelopes(Buffer.from([0, 0, 0]))).toThrow(/truncated/);
    expect(() => parseEnvelopes(envelope(1, {}))).toThrow(/compressed/);
    expect(() => parseEnvelopes(Buffer.concat([Buffer.from([0, 0, 0, 0, 3]), Buffer.from('{{{')]))).toThrow(/not JSON/);
  });

  it("maps Berth's API errors to Connect codes", () => {
    const cases: [ApiError, string][] = [
      [new ApiError('unprocessable_entity', 'x'), 'invalid_argument'],
      [new ApiError('not_found', 'x'), 'not_found'],
      [new ApiError('conflict', 'x'), 'failed_precondition'],
      [new ApiError('session_limit_exceeded', 'x'), 'resource_exhausted'],
      [new ApiError('not_implemented', 'x'), 'unimplemented'],
      [new ApiError('provider_error', 'x'), 'unavailable'],
      [new ApiError('timeout', 'x'), 'deadline_exceeded'],
      [new ApiError('internal_error', 'x'), 'internal'],
    ];
    for (const [error, code] of cases) expect(toConnectError(error).code).toBe(code);
    expect(toConnectError(new Error('secret detail')).message).toBe('internal error');
    expect(toConnectError(new ConnectError('unauthenticated', 'no')).code).toBe('unauthenticated');
  });
});

describe('processes', () => {
  it('quotes each word for the shell, single quotes included', () => {
    expect(shellQuote("it's")).toBe(`'it'\\''s'`);
    expect(['/bin/bash', '-l', '-c', 'echo "$HOME" && ls'].map(shellQuote).join(' ')).toBe(`'/bin/bash' '-l' '-c' 'echo "$HOME" && ls'`);
  });

  it("ends a process as envd does: an exit status, or a signal with exit code -1", () => {
    expect(endEvent({ status: 'exited', exitCode: 3 })).toEqual({ exitCode: 3, exited: true, status: 'exit status 3' });
    expect(endEvent({ status: 'signaled', exitCode: 137 })).toEqual({ exitCode: -1, exited: false, status: 'signal: killed' });
    expect(endEvent({ status: 'signaled', exitCode: 143 })).toEqual({ exitCode: -1, exited: false, status: 'signal: terminated' });
    expect(endEvent({ status: 'timedOut', exitCode: 137 })).toMatchObject({ exitCode: -1, error: 'the process reached its time limit' });
    expect(endEvent({ status: 'failed', exitCode: null })).toMatchObject({ exitCode: -1, exited: false, error: expect.any(String) });
  });
});

describe('ids, keys and tokens', () => {
  it('names a sandbox by its agent id without agt_, and refuses what is not one', () => {
    expect(sandboxIdOf('agt_01m80gqvefwgc4tgw5batt7zt1')).toBe('01m80gqvefwgc4tgw5batt7zt1');
    expect(agentIdOf('01m80gqvefwgc4tgw5batt7zt1')).toBe('agt_01m80gqvefwgc4tgw5batt7zt1');
    expect(() => agentIdOf('../x')).toThrow(E2bError);
    expect(() => agentIdOf('agt_01')).toThrow(E2bError);
  });

  it('takes a Berth key as it is or behind e2b_', () => {
    expect(berthKeyOf('e2b_svc_live_abc')).toBe('svc_live_abc');
    expect(berthKeyOf('svc_live_abc')).toBe('svc_live_abc');
    expect(berthKeyOf(undefined)).toBeUndefined();
  });

  it('issues envd tokens valid for one sandbox, signed by the install', () => {
    const tokens = new EnvdTokens(randomBytes(32));
    const principal = { organizationId: 'org_1', mode: 'live' as const, keyId: 'key_1' };
    const token = tokens.issue(principal, 'sbx1');
    expect(tokens.verify(token, 'sbx1')).toEqual(principal);
    expect(tokens.verify(token, 'sbx2')).toBeUndefined();
    expect(new EnvdTokens(randomBytes(32)).verify(token, 'sbx1')).toBeUndefined();
    const [payload, signature] = token.slice(5).split('.');
    const forged = Buffer.from(JSON.stringify({ s: 'sbx1', o: 'org_2', m: 'live', k: 'key_1' })).toString('base64url');
    expect(tokens.verify(`envd_${forged}.${signature}`, 'sbx1')).toBeUndefined();
    expect(tokens.verify(`envd_${payload}`, 'sbx1')).toBeUndefined();
  });
});
