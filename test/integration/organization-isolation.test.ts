import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, createOrganization, insertApproval, insertTask, newId } from '../../common/src/index.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { IdleProvider } from '../helpers/fake-providers.js';
import type { ApiClient, ApiResponse } from '../helpers/http.js';

/**
 * Two organizations on one install, route by route on the data plane: organization B holds a
 * session, an agent, a definition, a schedule, a trigger and a job it fired, a webhook, secrets
 * and a BYOI provider (snapshots and tasks need the controllers and a runner: not made here);
 * organization A's live key calls every /v1 route of the route table with B's ids in the path.
 * Routes that name one of B's objects answer 404 `not_found`; no answer to A holds any of B's ids;
 * and afterwards B's objects are exactly as they were (nothing A sent changed them).
 */
let api: TestApi;
let a: ApiClient;
let b: ApiClient;
const clock = new ManualClock('2026-11-01T09:00:00Z');
const ofB: Record<string, string> = {};

async function created(response: Promise<ApiResponse>, what: string): Promise<any> {
  const settled = await response;
  expect(settled.status, `${what}: ${JSON.stringify(settled.body)}`).toBeLessThan(300);
  return settled.body;
}

const send = (client: ApiClient, method: string, path: string, body?: unknown) =>
  client.raw(path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(10_000),
  });

/** B's objects as B reads them, to compare before and after A's calls. */
async function snapshotOfB(): Promise<unknown[]> {
  return Promise.all(
    [
      `/v1/sessions/${ofB.session}`,
      `/v1/agents/${ofB.agent}`,
      `/v1/agent-definitions/${ofB.definition}`,
      `/v1/schedules/${ofB.schedule}`,
      `/v1/triggers/${ofB.trigger}`,
      `/v1/webhooks/${ofB.webhook}`,
      `/v1/jobs/${ofB.job}`,
      `/v1/approvals/${ofB.approval}`,
      '/v1/secrets',
      `/v1/sessions/${ofB.session}/secrets`,
      '/v1/providers',
    ].map(async (path) => {
      const response = await b.get(path);
      return [path, response.status, response.body];
    }),
  );
}

beforeAll(async () => {
  api = await startTestApi({
    clock,
    providers: new ProviderRegistry([new IdleProvider()], 'idle'),
    app: { byoiPolicy: { allowHttp: false, allowPrivate: false }, webhookPolicy: { allowHttp: false, allowPrivate: false } },
  });
  a = (await api.client((await createOrganization(api.pool, 'a')).id, 'live')).api;
  const organizationB = (await createOrganization(api.pool, 'b')).id;
  b = (await api.client(organizationB, 'live')).api;
  ofB.session = (await created(b.post('/v1/sessions/by-user/bob', {}), 'session')).id;
  ofB.agent = (await created(b.post(`/v1/sessions/${ofB.session}/agents`, { compute: 'python', timeout: '15m' }), 'agent')).id;
  // A tool call of B's agent that waits for a decision, as a runner records it.
  const waiting = await insertTask(api.pool, { id: newId('task'), organizationId: organizationB, mode: 'live', sessionId: ofB.session, agentId: ofB.agent, input: 'b task' });
  ofB.approval = (
    await insertApproval(api.pool, {
      id: newId('apr'),
      organizationId: organizationB,
      mode: 'live',
      sessionId: ofB.session,
      agentId: ofB.agent,
      taskId: waiting.id,
      toolCallId: 'call_b',
      tool: 'exec',
      preview: { code: 'echo b-approval-preview' },
      rule: 0,
      expiresAt: new Date(Date.now() + 3_600_000),
    })
  ).id;
  ofB.definition = (await created(b.post('/v1/agent-definitions', { name: 'b-analyst', compute: 'python', model: 'openai/gpt-4o-mini' }), 'definition')).id;
  ofB.schedule = (await created(b.post('/v1/schedules', { agent: 'b-analyst', userId: 'bob', name: 'b nightly', cron: '30 2 * * *', timezone: 'UTC' }), 'schedule')).id;
  const trigger = await created(b.post('/v1/triggers', { agent: 'b-analyst', userId: 'bob', name: 'b-hook', type: 'webhook' }), 'trigger');
  ofB.trigger = trigger.id;
  // A fire of B's trigger makes a job of B's.
  const fireBody = JSON.stringify({ ticket: 1 });
  const fired = await fetch(`${api.baseUrl}${new URL(trigger.url).pathname}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-trigger-signature': createHmac('sha256', trigger.secret).update(fireBody).digest('hex') },
    body: fireBody,
  });
  expect(fired.status).toBe(202);
  ofB.job = ((await fired.json()) as { jobId: string }).jobId;
  ofB.webhook = (await created(b.post('/v1/webhooks', { url: 'https://hooks.example.com/b', events: ['agent.completed'] }), 'webhook')).id;
  await created(b.post('/v1/secrets', { B_ONLY_SECRET: 'b-value' }), 'secret');
  await created(b.post(`/v1/sessions/${ofB.session}/secrets`, { B_SESSION_SECRET: 'b-session-value' }), 'session secret');
  await created(
    send(b, 'PUT', '/v1/providers/openai', { credentialRef: 'B_ONLY_SECRET', config: { baseUrl: 'https://llm.b.example.com/v1' } }),
    'provider',
  );
});
afterAll(() => api?.close());

/** B's object for a route's first path segment after /v1 (the kind the `:id` names). */
function idFor(path: string): string | undefined {
  const kind = path.split('/')[2];
  return {
    sessions: ofB.session,
    agents: ofB.agent,
    'agent-definitions': ofB.definition,
    schedules: ofB.schedule,
    triggers: ofB.trigger,
    webhooks: ofB.webhook,
    jobs: ofB.job,
    approvals: ofB.approval,
  }[kind!];
}

describe('two organizations on the data plane', () => {
  it("a key of A never reaches B's objects, on any /v1 route", async () => {
    const before = await snapshotOfB();
    const secretsOfB = ['B_ONLY_SECRET', 'B_SESSION_SECRET', 'b-value', 'b-session-value', 'llm.b.example.com', 'b-approval-preview'];
    const idsOfB = Object.values(ofB);
    const checked: string[] = [];
    for (const route of api.app.routes.list()) {
      if (!route.path.startsWith('/v1/') || route.auth === false) continue;
      const id = route.path.includes(':id') ? idFor(route.path) : undefined;
      // Routes of objects B has none of here (snapshots, tasks).
      if (route.path.includes(':id') && !id) continue;
      const path = route.path
        .replace(':id', id ?? '')
        .replace(':userId', 'bob')
        .replace(':name', route.path.startsWith('/v1/sessions') ? 'B_SESSION_SECRET' : 'B_ONLY_SECRET')
        .replace(':provider', 'openai')
        .replace(':pid', '7')
        .replace(':version', '1')
        .replace(':deliveryId', 'dlv_00000000000000000000000000')
        .replace(':port', '8000');
      const body = route.body ? (route.requestExample ?? {}) : undefined;
      // The file routes name their file in the query; without one they answer 422 before any lookup.
      const query = /\/files(\/(list|stat|archive))?$/.test(route.path) ? '?path=notes.txt' : '';
      const response = await send(a, route.method.toUpperCase(), path + query, body);
      const text = typeof response.body === 'string' ? response.body : JSON.stringify(response.body);
      const label = `${route.method.toUpperCase()} ${route.path} → ${response.status} ${text.slice(0, 300)}`;
      // An error may repeat the id A sent; nothing else of B's may appear.
      for (const leaked of [...idsOfB, ...secretsOfB].filter((value) => !path.includes(value))) expect(text.includes(leaked), label).toBe(false);
      // The terminal is a WebSocket: a plain GET is refused the same for anyone (400), before any
      // lookup; its upgrade looks the agent up for the caller like every other route.
      if (id && route.path.endsWith('/pty')) expect(response.status, label).toBe(400);
      else if (id) expect(response.status, label).toBe(404);
      checked.push(`${route.method.toUpperCase()} ${route.path} ${response.status}`);
    }
    // Every kind of B's objects was addressed by the routes that take its id.
    expect(checked.filter((line) => line.endsWith(' 404')).length).toBeGreaterThanOrEqual(25);
    expect(await snapshotOfB()).toEqual(before);
  });

  it("a key of A cannot name B's definition (by name or id) in its own schedules, triggers or agents", async () => {
    for (const agent of ['b-analyst', ofB.definition!]) {
      const schedule = await a.post('/v1/schedules', { agent, userId: 'alice', name: 'a nightly', cron: '30 2 * * *', timezone: 'UTC' });
      expect(schedule.status, JSON.stringify(schedule.body)).toBeGreaterThanOrEqual(400);
      const trigger = await a.post('/v1/triggers', { agent, userId: 'alice', name: 'a-hook', type: 'webhook' });
      expect(trigger.status, JSON.stringify(trigger.body)).toBeGreaterThanOrEqual(400);
      const session = (await a.post('/v1/sessions/by-user/alice', {})).body.id;
      const fromDefinition = await a.post(`/v1/sessions/${session}/agents`, { definition: agent });
      expect([fromDefinition.status, fromDefinition.body.error?.details?.fields?.definition !== undefined]).toEqual([422, true]);
    }
  });
});
