import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ERROR_STATUS } from '@berth/common';
import { afterAll, describe, expect, it } from 'vitest';
import { openapiDocument, routeErrorCodes } from './openapi.js';
import { routeTableApp } from './route-table-app.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');

const app = routeTableApp();
afterAll(() => app.close());

const document = openapiDocument(app.routes, { version: '0.1.0' }) as any;
const management = openapiDocument(app.managementRoutes, { version: '0.1.0', plane: 'management' }) as any;
const operations = Object.values(document.paths as Record<string, Record<string, any>>).flatMap((methods) => Object.values(methods));

async function redoclyProblems(doc: unknown): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-openapi-'));
  try {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const lint = await promisify(execFile)(
      join(ROOT, 'node_modules', '.bin', 'redocly'),
      ['lint', file, '--config', join(ROOT, 'redocly.yaml'), '--format', 'json'],
      { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 },
    ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
    const problems = (JSON.parse(lint.stdout) as { problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[] }).problems;
    return problems.map((problem) => `${problem.severity} ${problem.ruleId}: ${problem.location[0]?.pointer} ${problem.message}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the management OpenAPI document (/api/openapi.json)', () => {
  it('passes redocly lint with the repository rules', async () => {
    // Only the three sign-in steps that answer with a redirect, as they must.
    expect(await redoclyProblems(management)).toEqual([
      'error operation-2xx-response: #/paths/~1api~1auth~1login/get/responses Operation must have at least one `2XX` response.',
      'error operation-2xx-response: #/paths/~1api~1auth~1callback/get/responses Operation must have at least one `2XX` response.',
      'error operation-2xx-response: #/paths/~1api~1auth~1link/get/responses Operation must have at least one `2XX` response.',
    ]);
  }, 60_000);

  it('holds every /api route and nothing of /v1, and the data-plane document nothing of /api', () => {
    expect(Object.keys(management.paths).every((path) => path.startsWith('/api/'))).toBe(true);
    expect(Object.keys(document.paths).some((path) => path.startsWith('/api/'))).toBe(false);
    const operationIds = Object.values(management.paths as Record<string, Record<string, any>>).flatMap((methods) => Object.values(methods).map((operation) => operation.operationId));
    expect(operationIds.sort()).toEqual(app.managementRoutes.list().map((route) => route.operationId).sort());
    for (const path of ['/api/team', '/api/team/{memberId}', '/api/team/transfer', '/api/auth/login', '/api/auth/callback', '/api/me']) expect(management.paths[path], path).toBeDefined();
  });

  it('authorizes by the session cookie, with the CSRF header on changes; sign-in itself needs neither', () => {
    expect(management.components.securitySchemes).toEqual({
      session: expect.objectContaining({ type: 'apiKey', in: 'cookie', name: 'berth_session' }),
      csrf: expect.objectContaining({ type: 'apiKey', in: 'header', name: 'X-CSRF-Token' }),
    });
    expect(management.paths['/api/team'].get.security).toEqual([{ session: [] }]);
    expect(management.paths['/api/team'].post.security).toBeUndefined(); // the document's default: session and csrf
    expect(management.security).toEqual([{ session: [], csrf: [] }]);
    expect(management.paths['/api/auth/login'].get.security).toEqual([]);
    expect(Object.keys(management.paths['/api/team/{memberId}'].patch.responses).sort()).toEqual(['200', '400', '401', '403', '404', '413', '415', '422', '500']);
    expect(management.paths['/api/team/{memberId}'].patch.responses['400'].description).toContain('invalid_role');
  });

  it('carries examples that match their schemas', () => {
    for (const route of app.managementRoutes.list()) {
      for (const [status, response] of Object.entries(route.responses)) {
        if (response.schema) expect(() => response.schema!.parse(response.example), `${route.operationId} ${status}`).not.toThrow();
      }
      if (route.body) expect(() => route.body.parse(route.requestExample), route.operationId).not.toThrow();
    }
  });
});

describe('the OpenAPI document', () => {
  it('passes redocly lint with the repository rules', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-openapi-'));
    try {
      const file = join(dir, 'openapi.json');
      writeFileSync(file, JSON.stringify(document));
      const lint = await promisify(execFile)(
        join(ROOT, 'node_modules', '.bin', 'redocly'),
        ['lint', file, '--config', join(ROOT, 'redocly.yaml'), '--format', 'json'],
        { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 },
      ).catch((error: { stdout?: string; stderr?: string }) => {
        // Its one error (the terminal's 101) makes redocly exit 1; a lint that did not run has no report.
        if (!error.stdout) throw new Error(`redocly lint failed:\n${error.stderr}`);
        return { stdout: error.stdout };
      });
      const problems = (JSON.parse(lint.stdout) as { problems: { ruleId: string; severity: string; message: string }[] }).problems;
      // Only the two spec paths beside `/v1/sessions/by-user/{userId}` (see redocly.yaml), and the
      // terminal WebSocket, which succeeds with 101 Switching Protocols, never a 2XX.
      expect(problems.map((problem) => `${problem.severity} ${problem.ruleId}: ${problem.message}`)).toEqual([
        'error operation-2xx-response: Operation must have at least one `2XX` response.',
        'warn no-ambiguous-paths: Paths should resolve unambiguously. Found two ambiguous paths: `/v1/sessions/by-user/{userId}` and `/v1/sessions/{id}/agents`.',
        'warn no-ambiguous-paths: Paths should resolve unambiguously. Found two ambiguous paths: `/v1/sessions/by-user/{userId}` and `/v1/sessions/{id}/secrets`.',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('names the main schemas as components and refers to them', () => {
    const schemas = document.components.schemas;
    for (const name of ['Agent', 'AgentPage', 'Session', 'SessionPage', 'Snapshot', 'ExecResult', 'Task', 'AgentDefinition', 'Webhook', 'Error']) {
      expect(schemas[name], name).toBeDefined();
    }
    expect(schemas.Error.properties.error.properties.code.enum.sort()).toEqual(Object.keys(ERROR_STATUS).sort());
    const getAgent = document.paths['/v1/agents/{id}'].get;
    expect(getAgent.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Agent' });
    expect(document.paths['/v1/sessions'].get.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/SessionPage' });
    expect(schemas.SessionPage.properties.data.items).toEqual({ $ref: '#/components/schemas/Session' });
  });

  it('lists the statuses the HTTP layer adds to every route', () => {
    for (const operation of operations) {
      const statuses = Object.keys(operation.responses);
      expect(statuses, operation.operationId).toEqual(expect.arrayContaining(['400', '500']));
      if (operation.security?.length !== 0) expect(statuses, operation.operationId).toContain('401');
      if (operation.requestBody) expect(statuses, operation.operationId).toEqual(expect.arrayContaining(['413', '415', '422']));
    }
    const exec = document.paths['/v1/agents/{id}/exec'].post;
    expect(Object.keys(exec.responses)).toEqual(expect.arrayContaining(['402', '404', '409', '502', '504']));
    expect(exec.responses['401'].description).toContain('auth/key_revoked');
  });

  it('carries examples that match their schemas', () => {
    for (const route of app.routes.list()) {
      for (const [status, response] of Object.entries(route.responses)) {
        // A response without a body (a 304) has nothing to show.
        if (response.schema || response.contentType) expect(response.example, `${route.operationId} ${status}`).toBeDefined();
        if (response.schema) expect(() => response.schema!.parse(response.example), `${route.operationId} ${status}`).not.toThrow();
      }
      if (route.body) {
        expect(route.requestExample, route.operationId).toBeDefined();
        expect(() => route.body.parse(route.requestExample), route.operationId).not.toThrow();
      }
      expect(routeErrorCodes(route).length, route.operationId).toBeGreaterThan(0);
    }
  });

  it('documents the fire URL: no key, its signature headers, any JSON body, and every refusal', () => {
    const fire = document.paths['/triggers/{id}/fire'].post;
    expect(fire.security).toEqual([]);
    expect(fire.parameters).toEqual([
      expect.objectContaining({ name: 'id', in: 'path', required: true }),
      expect.objectContaining({ name: 'x-trigger-signature', in: 'header', required: true }),
      expect.objectContaining({ name: 'x-trigger-timestamp', in: 'header', required: false }),
    ]);
    expect(fire.requestBody.content['application/json'].schema).toEqual({});
    expect(Object.keys(fire.responses).sort()).toEqual(['202', '400', '401', '404', '409', '413', '415', '422', '500']);
    expect(fire.responses['202'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/TriggerFired' });
    expect(Object.keys(document.paths['/v1/triggers/{id}']).sort()).toEqual(['delete', 'get']);
    expect(document.paths['/v1/jobs/{id}'].get.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Job' });
    expect(document.components.schemas.Trigger.required).toEqual(expect.arrayContaining(['id', 'url', 'secret']));
  });

  it('names the server it was fetched from, or a relative one', () => {
    expect(document.servers).toEqual([expect.objectContaining({ url: '/' })]);
    expect(openapiDocument(app.routes, { version: '0.1.0', serverUrl: 'https://berth.example.com' }).servers).toEqual([
      expect.objectContaining({ url: 'https://berth.example.com' }),
    ]);
  });
});
