import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_PATTERN, ManualClock, createApiKey, recordEvent, type Role } from '../../common/src/index.js';
import { PERMISSIONS, type Permission } from '../../apiserver/src/management/permissions.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import type { Browser, BrowserResponse } from '../helpers/browser.js';
import { IdleProvider } from '../helpers/fake-providers.js';
import { apiClient, type ApiClient } from '../helpers/http.js';
import { managementPeople, permissionTableOf, type TestOrganization } from '../helpers/management.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * The management routes of API keys, plan, budgets, organization settings, the audit log and
 * the data-plane views, over HTTP with real cookies on a real database: the permission table
 * cell by cell, then what each route does, and two organizations that never see each other.
 */
let api: TestApi;
let receiver: WebhookReceiver;
const clock = new ManualClock('2026-11-02T09:00:00Z');
let team: ReturnType<typeof managementPeople>;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  api = await startTestApi({
    clock,
    providers: new ProviderRegistry([new IdleProvider()], 'idle'),
    app: {
      plans: { defaultPlan: 'free', enterpriseRateLimit: 5000 },
      webhookPolicy: { allowHttp: true, allowPrivate: true },
    },
  });
  team = managementPeople({ pool: api.pool, clock, baseUrl: api.baseUrl });
});
afterAll(async () => {
  await api?.close();
  await receiver?.close();
});

/** A PUT of a JSON body with the client's key (the client has no PUT of its own). */
const put = (client: ApiClient, path: string, body: unknown) => client.raw(path, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** A key of the organization for its data-plane requests. */
async function keyOf(organizationId: string, mode: 'live' | 'test' = 'live'): Promise<ApiClient> {
  const { key } = await createApiKey(api.pool, { organizationId, mode, label: 'test' });
  return apiClient(api.baseUrl, key);
}

function expectForbidden(response: BrowserResponse, permission: Permission, role: Role) {
  expect(response.status).toBe(403);
  expect(response.body.error).toMatchObject({ code: 'forbidden', details: { reason: 'role', permission, role } });
}

describe('the permission table on these routes, one test per route and role', () => {
  let organization: TestOrganization;
  let browsers: Record<Role, Browser>;
  let live: ApiClient;
  let webhookId: string;
  let sessionId: string;
  let definitionId: string;

  beforeAll(async () => {
    organization = await team.organization(['admin', 'member', 'viewer']);
    browsers = {
      owner: organization.owner.browser,
      admin: organization.members.admin!.browser,
      member: organization.members.member!.browser,
      viewer: organization.members.viewer!.browser,
    };
    live = await keyOf(organization.organizationId);
    expect((await live.post('/v1/secrets', { REMOTE_TOKEN: 'a-token-of-the-remote-provider' })).status).toBe(200);
    webhookId = (await live.post('/v1/webhooks', { url: `${receiver.url}/hook`, events: ['agent.completed'] })).body.id;
    sessionId = (await live.post('/v1/sessions', { userId: 'alice' })).body.id;
    definitionId = (await live.post('/v1/agent-definitions', { name: 'analyst', systemPrompt: 'You analyse.' })).body.id;
    expect((await put(live, `/v1/agent-definitions/${definitionId}`, { systemPrompt: 'You analyse briefly.' })).status).toBe(200);
  });

  /** Names are unique in the organization, and every role's call shares it: each call makes its own. */
  let made = 0;
  const unique = (name: string) => `${name}-${++made}`;
  /** A knowledge collection the owner made for one call; its name. */
  async function collection(name: string): Promise<string> {
    const named = unique(name);
    expect((await organization.owner.browser.post('/api/knowledge/collections', { name: named })).status).toBe(201);
    return named;
  }

  /** Each route, the permission it needs, the request, and the answer a role that holds it gets. */
  const ROUTES: { permission: Permission; name: string; call: (browser: Browser) => Promise<BrowserResponse>; allowed: number }[] = [
    { permission: 'keys.view', name: 'GET /api/keys', call: (b) => b.get('/api/keys'), allowed: 200 },
    { permission: 'keys.manage', name: 'POST /api/keys', call: (b) => b.post('/api/keys', { label: 'ci', mode: 'test' }), allowed: 201 },
    {
      permission: 'keys.manage',
      name: 'DELETE /api/keys/:keyId',
      call: async (b) => b.delete(`/api/keys/${(await createApiKey(api.pool, { organizationId: organization.organizationId, mode: 'test' })).record.id}`),
      allowed: 200,
    },
    { permission: 'team.view', name: 'GET /api/organization', call: (b) => b.get('/api/organization'), allowed: 200 },
    { permission: 'organization.update', name: 'PATCH /api/organization', call: (b) => b.patch('/api/organization', { name: 'Acme' }), allowed: 200 },
    { permission: 'billing.view', name: 'GET /api/plan', call: (b) => b.get('/api/plan'), allowed: 200 },
    { permission: 'billing.manage', name: 'PUT /api/plan', call: (b) => b.put('/api/plan', { plan: 'enterprise' }), allowed: 200 },
    { permission: 'billing.view', name: 'GET /api/session-defaults', call: (b) => b.get('/api/session-defaults'), allowed: 200 },
    { permission: 'billing.manage', name: 'PUT /api/session-defaults', call: (b) => b.put('/api/session-defaults', { sessionDefaults: {} }), allowed: 200 },
    { permission: 'audit.view', name: 'GET /api/audit-log', call: (b) => b.get('/api/audit-log'), allowed: 200 },
    {
      permission: 'webhooks.manage',
      name: 'POST /api/webhooks',
      call: (b) => b.post('/api/webhooks', { url: `${receiver.url}/dashboard`, events: ['agent.failed'] }),
      allowed: 201,
    },
    { permission: 'observability.view', name: 'GET /api/webhooks', call: (b) => b.get('/api/webhooks'), allowed: 200 },
    { permission: 'observability.view', name: 'GET /api/webhooks/:id', call: (b) => b.get(`/api/webhooks/${webhookId}`), allowed: 200 },
    { permission: 'webhooks.manage', name: 'POST /api/webhooks/:id/test', call: (b) => b.post(`/api/webhooks/${webhookId}/test`), allowed: 200 },
    { permission: 'observability.view', name: 'GET /api/webhooks/:id/deliveries', call: (b) => b.get(`/api/webhooks/${webhookId}/deliveries`), allowed: 200 },
    {
      permission: 'webhooks.manage',
      name: 'DELETE /api/webhooks/:id',
      call: async (b) => b.delete(`/api/webhooks/${(await live.post('/v1/webhooks', { url: `${receiver.url}/gone`, events: ['agent.failed'] })).body.id}`),
      allowed: 200,
    },
    { permission: 'providers.view', name: 'GET /api/providers', call: (b) => b.get('/api/providers'), allowed: 200 },
    {
      permission: 'providers.manage',
      name: 'PUT /api/providers/:provider',
      call: (b) => b.put('/api/providers/remote', { credentialRef: 'REMOTE_TOKEN', config: { endpoint: 'https://compute.example.com' } }),
      allowed: 200,
    },
    { permission: 'providers.manage', name: 'DELETE /api/providers/:provider', call: (b) => b.delete('/api/providers/never-configured'), allowed: 404 },
    { permission: 'secrets.write', name: 'POST /api/secrets', call: (b) => b.post('/api/secrets', { DASHBOARD_TOKEN: 'a-value-set-in-the-dashboard' }), allowed: 200 },
    { permission: 'secrets.view', name: 'GET /api/secrets', call: (b) => b.get('/api/secrets'), allowed: 200 },
    {
      permission: 'secrets.delete',
      name: 'DELETE /api/secrets/:name',
      call: async (b) => {
        await live.post('/v1/secrets', { TO_DELETE: 'a-value-to-delete' });
        return b.delete('/api/secrets/TO_DELETE');
      },
      allowed: 200,
    },
    { permission: 'sessions.manage', name: 'POST /api/sessions', call: (b) => b.post('/api/sessions', { userId: 'made-in-the-dashboard' }), allowed: 201 },
    { permission: 'sessions.manage', name: 'PATCH /api/sessions/:id', call: (b) => b.patch(`/api/sessions/${sessionId}`, { metadata: { by: 'dashboard' } }), allowed: 200 },
    { permission: 'billing.view', name: 'GET /api/usage/summary', call: (b) => b.get('/api/usage/summary'), allowed: 200 },
    { permission: 'billing.view', name: 'GET /api/usage/daily', call: (b) => b.get('/api/usage/daily'), allowed: 200 },
    { permission: 'billing.view', name: 'GET /api/usage/users/:userId', call: (b) => b.get('/api/usage/users/alice'), allowed: 200 },
    { permission: 'billing.view', name: 'GET /api/usage/models', call: (b) => b.get('/api/usage/models'), allowed: 200 },
    { permission: 'sessions.view', name: 'GET /api/sessions', call: (b) => b.get('/api/sessions'), allowed: 200 },
    { permission: 'sessions.view', name: 'GET /api/sessions/:id', call: (b) => b.get(`/api/sessions/${sessionId}`), allowed: 200 },
    { permission: 'sessions.view', name: 'GET /api/sessions/:id/agents', call: (b) => b.get(`/api/sessions/${sessionId}/agents`), allowed: 200 },
    { permission: 'sessions.view', name: 'GET /api/agents/:id', call: (b) => b.get('/api/agents/agt_00000000000000000000000000'), allowed: 404 },
    { permission: 'sessions.view', name: 'GET /api/agents/:id/stream', call: (b) => b.get('/api/agents/agt_00000000000000000000000000/stream'), allowed: 404 },
    {
      permission: 'sessions.manage',
      name: 'POST /api/agents/:id/exec',
      call: (b) => b.post('/api/agents/agt_00000000000000000000000000/exec', { language: 'python', code: 'print(1)' }),
      allowed: 404,
    },
    { permission: 'observability.view', name: 'GET /api/events', call: (b) => b.get('/api/events'), allowed: 200 },
    { permission: 'observability.view', name: 'GET /api/schedules', call: (b) => b.get('/api/schedules'), allowed: 200 },
    { permission: 'observability.view', name: 'GET /api/tasks/:id', call: (b) => b.get('/api/tasks/task_00000000000000000000000000'), allowed: 404 },
    { permission: 'observability.view', name: 'GET /api/jobs/:id', call: (b) => b.get('/api/jobs/job_00000000000000000000000000'), allowed: 404 },
    {
      permission: 'observability.view',
      name: 'GET /api/schedules/:id/history',
      call: (b) => b.get('/api/schedules/sched_00000000000000000000000000/history'),
      allowed: 404,
    },
    {
      permission: 'webhooks.manage',
      name: 'POST /api/webhooks/:id/deliveries/:deliveryId/resend',
      call: async (b) => b.post(`/api/webhooks/${webhookId}/deliveries/${(await live.post(`/v1/webhooks/${webhookId}/test`)).body.deliveryId}/resend`),
      allowed: 200,
    },
    { permission: 'billing.view', name: 'GET /api/usage/daily-by-kind', call: (b) => b.get('/api/usage/daily-by-kind?period=last_7_days'), allowed: 200 },
    { permission: 'billing.view', name: 'GET /api/usage/users', call: (b) => b.get('/api/usage/users?limit=5'), allowed: 200 },
    { permission: 'observability.view', name: 'GET /api/triggers', call: (b) => b.get('/api/triggers'), allowed: 200 },
    { permission: 'observability.view', name: 'GET /api/workflows', call: (b) => b.get('/api/workflows'), allowed: 200 },
    { permission: 'observability.view', name: 'GET /api/workflows/:id', call: (b) => b.get('/api/workflows/wf_00000000000000000000000000'), allowed: 404 },
    { permission: 'observability.view', name: 'GET /api/workflows/:id/runs', call: (b) => b.get('/api/workflows/wf_00000000000000000000000000/runs'), allowed: 404 },
    { permission: 'observability.view', name: 'GET /api/workflow-runs/:runId', call: (b) => b.get('/api/workflow-runs/wfr_00000000000000000000000000'), allowed: 404 },
    { permission: 'observability.view', name: 'GET /api/fleets', call: (b) => b.get('/api/fleets'), allowed: 200 },
    { permission: 'observability.view', name: 'GET /api/fleets/:id', call: (b) => b.get('/api/fleets/flt_00000000000000000000000000'), allowed: 404 },
    { permission: 'observability.view', name: 'GET /api/fleets/:id/items', call: (b) => b.get('/api/fleets/flt_00000000000000000000000000/items'), allowed: 404 },
    { permission: 'observability.view', name: 'GET /api/channels', call: (b) => b.get('/api/channels'), allowed: 200 },
    { permission: 'observability.view', name: 'GET /api/channels/:id', call: (b) => b.get('/api/channels/ch_00000000000000000000000000'), allowed: 404 },
    { permission: 'sessions.view', name: 'GET /api/snapshots', call: (b) => b.get('/api/snapshots'), allowed: 200 },
    { permission: 'sessions.view', name: 'GET /api/snapshots/:id', call: (b) => b.get('/api/snapshots/snap_00000000000000000000000000'), allowed: 404 },
    { permission: 'sessions.manage', name: 'POST /api/snapshots/:id/resume', call: (b) => b.post('/api/snapshots/snap_00000000000000000000000000/resume', {}), allowed: 404 },
    { permission: 'agentResources.view', name: 'GET /api/agent-definitions', call: (b) => b.get('/api/agent-definitions'), allowed: 200 },
    { permission: 'agentResources.view', name: 'GET /api/agent-definitions/:id', call: (b) => b.get(`/api/agent-definitions/${definitionId}`), allowed: 200 },
    { permission: 'agentResources.view', name: 'GET /api/agent-definitions/:id/versions', call: (b) => b.get(`/api/agent-definitions/${definitionId}/versions`), allowed: 200 },
    {
      permission: 'agentResources.view',
      name: 'GET /api/agent-definitions/:id/versions/:version',
      call: (b) => b.get(`/api/agent-definitions/${definitionId}/versions/1`),
      allowed: 200,
    },
    {
      permission: 'agentResources.manage',
      name: 'POST /api/agent-definitions/:id/rollback',
      call: (b) => b.post(`/api/agent-definitions/${definitionId}/rollback`, { version: 1 }),
      allowed: 200,
    },
    { permission: 'agentResources.view', name: 'GET /api/knowledge/collections', call: (b) => b.get('/api/knowledge/collections'), allowed: 200 },
    {
      permission: 'agentResources.manage',
      name: 'POST /api/knowledge/collections',
      call: (b) => b.post('/api/knowledge/collections', { name: unique('handbook') }),
      allowed: 201,
    },
    {
      permission: 'agentResources.manage',
      name: 'DELETE /api/knowledge/collections/:id',
      call: async (b) => b.delete(`/api/knowledge/collections/${await collection('doomed')}`),
      allowed: 200,
    },
    {
      permission: 'agentResources.view',
      name: 'GET /api/knowledge/collections/:id/sources',
      call: async (b) => b.get(`/api/knowledge/collections/${await collection('read-me')}/sources`),
      allowed: 200,
    },
    {
      permission: 'agentResources.manage',
      name: 'POST /api/knowledge/collections/:id/sources',
      call: async (b) => b.post(`/api/knowledge/collections/${await collection('write-me')}/sources`, { type: 'text', text: 'Refunds take 14 days.' }),
      allowed: 201,
    },
    { permission: 'agentResources.view', name: 'GET /api/mcp-servers', call: (b) => b.get('/api/mcp-servers'), allowed: 200 },
    {
      permission: 'agentResources.manage',
      name: 'POST /api/mcp-servers',
      call: (b) => b.post('/api/mcp-servers', { name: unique('crm'), url: 'https://mcp.example.com/mcp' }),
      allowed: 201,
    },
    {
      permission: 'agentResources.manage',
      name: 'DELETE /api/mcp-servers/:id',
      call: async (b) => {
        const name = unique('doomed');
        expect((await organization.owner.browser.post('/api/mcp-servers', { name, url: 'https://mcp.example.com/mcp' })).status).toBe(201);
        return b.delete(`/api/mcp-servers/${name}`);
      },
      allowed: 200,
    },
  ];

  const cells = ROUTES.flatMap((route) => (['owner', 'admin', 'member', 'viewer'] as const).map((role) => ({ ...route, role })));

  it('covers every management route of this part of the plane', async () => {
    const served = api.app.managementRoutes
      .list()
      .filter((route) => route.permission !== 'signed-in' && route.auth !== false && permissionTableOf(route.path) === 'management-settings')
      .map((route) => `${route.method.toUpperCase()} ${route.path.replace(/:([A-Za-z]+)/g, ':$1')}`)
      .sort();
    expect(ROUTES.map((route) => route.name).sort()).toEqual(served);
  });

  it.each(cells)('$name as $role', async ({ permission, call, allowed, role }) => {
    const response = await call(browsers[role]);
    if ((PERMISSIONS[permission] as readonly Role[]).includes(role)) {
      expect(response.status, JSON.stringify(response.body)).toBe(allowed);
    } else {
      expectForbidden(response, permission, role);
    }
  });
});

describe('API keys', () => {
  it('creates a key shown in full once, lists it by prefix with its creator and last use, and revokes it for its next request', async () => {
    const { owner } = await team.organization(['viewer']);
    const created = await owner.browser.post('/api/keys', { label: 'backend', mode: 'live' });
    expect(created.status).toBe(201);
    expect(created.body.key).toMatch(KEY_PATTERN);
    expect(created.body).toMatchObject({ label: 'backend', mode: 'live', createdBy: owner.userId, lastUsedAt: null, revokedAt: null });
    expect(created.body.key.startsWith(created.body.prefix)).toBe(true);

    const data = apiClient(api.baseUrl, created.body.key);
    expect((await data.get('/v1/sessions')).status).toBe(200);
    // A key's use is recorded beside the request, not before its answer.
    const entryOf = async () => {
      const listed = await owner.browser.get('/api/keys');
      return { listed, entry: listed.body.data.find((key: { id: string }) => key.id === created.body.id) };
    };
    await expect.poll(async () => (await entryOf()).entry?.lastUsedAt).not.toBeNull();
    const { listed, entry } = await entryOf();
    expect(entry).toEqual({
      id: created.body.id,
      prefix: created.body.prefix,
      label: 'backend',
      mode: 'live',
      createdBy: owner.userId,
      createdAt: clock.now().toISOString(),
      lastUsedAt: clock.now().toISOString(),
      revokedAt: null,
    });
    expect(JSON.stringify(listed.body)).not.toContain(created.body.key);
    expect(JSON.stringify(await (await team.signIn(owner.userId)).get('/api/keys'))).not.toContain(created.body.key);

    const revoked = await owner.browser.delete(`/api/keys/${created.body.id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.revokedAt).toBe(clock.now().toISOString());
    const refused = await data.get('/v1/sessions');
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('auth/key_revoked');
      });

  it('keeps a key working after its creator is removed from the team', async () => {
    const { owner, members } = await team.organization(['admin', 'member']);
    const created = await members.admin!.browser.post('/api/keys', { label: 'made by the admin', mode: 'test' });
    expect(created.status).toBe(201);
    expect((await owner.browser.delete(`/api/team/${members.admin!.memberId}`)).status).toBe(200);
    expect((await members.admin!.browser.get('/api/keys')).status).toBe(403);
    const data = apiClient(api.baseUrl, created.body.key);
    expect((await data.get('/v1/sessions')).status).toBe(200);
    const listed = await owner.browser.get('/api/keys');
    expect(listed.body.data.find((key: { id: string }) => key.id === created.body.id).createdBy).toBe(members.admin!.userId);
  });

  it('refuses a creation without the CSRF token, writing nothing', async () => {
    const { owner } = await team.organization(['member']);
    const before = (await owner.browser.get('/api/keys')).body.data.length;
    const refused = await owner.browser.post('/api/keys', { label: 'x', mode: 'live' }, { headers: { 'x-csrf-token': 'not-the-token' } });
    expect(refused.status).toBe(403);
    expect(refused.body.error.details.reason).toBe('csrf');
    expect((await owner.browser.get('/api/keys')).body.data).toHaveLength(before);
  });

  it('validates the body with the error envelope', async () => {
    const { owner } = await team.organization();
    const response = await owner.browser.post('/api/keys', { label: '', mode: 'staging', extra: true });
    expect(response.status).toBe(422);
    expect(Object.keys(response.body.error.details.fields).sort()).toEqual(['body', 'label', 'mode']);
  });
});

describe('plan, budgets and organization settings', () => {
  it("shows the install's default plan, changes it, and the next /v1 request is limited by the new one", async () => {
    const { owner, organizationId } = await team.organization(['member']);
    const data = await keyOf(organizationId);
    expect((await owner.browser.get('/api/plan')).body).toEqual({
      plan: null,
      effectivePlan: 'free',
      requestsPerMinute: 60,
      windowSeconds: 60,
      defaultPlan: 'free',
      plans: { free: 60, pro: 300, enterprise: 5000 },
    });
    expect((await data.get('/v1/sessions')).headers.get('ratelimit-limit')).toBe('60');
    const changed = await owner.browser.put('/api/plan', { plan: 'pro' });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ plan: 'pro', effectivePlan: 'pro', requestsPerMinute: 300 });
    const next = await data.get('/v1/sessions');
    expect(next.headers.get('ratelimit-limit')).toBe('300');
    expect(next.headers.get('ratelimit-remaining')).toBe('298');
    expect((await owner.browser.put('/api/plan', { plan: null })).body.effectivePlan).toBe('free');
    expect((await owner.browser.put('/api/plan', { plan: 'platinum' })).status).toBe(422);
  });

  it('gives new sessions the budgets as default limits; sessions keep the limits they give', async () => {
    const { owner, organizationId } = await team.organization();
    const data = await keyOf(organizationId);
    const sessionDefaults = { maxCost: { amount: 500, currency: 'usd', period: 'day' }, maxAgents: 2 };
    const set = await owner.browser.put('/api/session-defaults', { sessionDefaults });
    expect(set.status).toBe(200);
    expect((await owner.browser.get('/api/session-defaults')).body).toEqual({ sessionDefaults });

    expect((await data.post('/v1/sessions', { userId: 'bob' })).body.limits).toEqual(sessionDefaults);
    expect((await data.post('/v1/sessions', { userId: 'carol', limits: { maxAgents: 5 } })).body.limits).toEqual({ ...sessionDefaults, maxAgents: 5 });
    expect((await data.post('/v1/sessions/by-user/dave', {})).body.limits).toEqual(sessionDefaults);

    const otherCurrency = await owner.browser.put('/api/session-defaults', { sessionDefaults: { maxCost: { amount: 5, currency: 'eur', period: 'day' } } });
    expect(otherCurrency.status).toBe(422);
    const unknownLimit = await owner.browser.put('/api/session-defaults', { sessionDefaults: { maxGpus: 1 } });
    expect(unknownLimit.status).toBe(422);
    expect((await owner.browser.get('/api/session-defaults')).body).toEqual({ sessionDefaults });
  });

  it('renames the organization', async () => {
    const { owner, organizationId } = await team.organization();
    const renamed = await owner.browser.patch('/api/organization', { name: '  Acme Robotics ' });
    expect(renamed.body).toEqual({ id: organizationId, name: 'Acme Robotics', createdAt: expect.any(String) });
    expect((await owner.browser.get('/api/organization')).body.name).toBe('Acme Robotics');
  });
});

describe('data-plane views', () => {
  it('answers as the data plane does, for the data of the mode asked', async () => {
    const { owner, organizationId } = await team.organization(['viewer']);
    const live = await keyOf(organizationId, 'live');
    const test = await keyOf(organizationId, 'test');
    const session = (await live.post('/v1/sessions', { userId: 'erin' })).body;
    expect((await owner.browser.get('/api/sessions')).body).toEqual((await live.get('/v1/sessions')).body);
    expect((await owner.browser.get(`/api/sessions/${session.id}`)).body).toEqual(session);
    expect((await owner.browser.get('/api/sessions?mode=test')).body.data).toEqual([]);
    expect((await owner.browser.get(`/api/sessions/${session.id}?mode=test`)).status).toBe(404);
    expect((await owner.browser.get('/api/usage/summary?period=month')).body).toEqual((await live.get('/v1/usage/summary?period=month')).body);

    const created = await owner.browser.post('/api/webhooks?mode=test', { url: `${receiver.url}/test-mode`, events: ['agent.completed'] });
    expect(created.status).toBe(201);
    expect((await test.get('/v1/webhooks')).body.data.map((hook: { id: string }) => hook.id)).toEqual([created.body.id]);
    expect((await live.get('/v1/webhooks')).body.data).toEqual([]);
  });

  it("validates the query as the data-plane route does, refinements included, and refuses an unknown mode or field", async () => {
    const { owner } = await team.organization();
    const mixed = await owner.browser.get('/api/usage/summary?period=today&from=2026-11-01T00:00:00Z');
    expect(mixed.status).toBe(422);
    expect(Object.keys(mixed.body.error.details.fields).sort()).toEqual(['from', 'period']);
    expect((await owner.browser.get('/api/sessions?mode=staging')).status).toBe(422);
    expect((await owner.browser.get('/api/sessions?sort=name')).status).toBe(422);
  });
});

describe("the dashboard's reads and actions beside the views", () => {
  it('splits each day of the period by kind and lists the users by cost, from the ledger', async () => {
    const { owner, members, organizationId } = await team.organization(['viewer']);
    // A minute ago: a period runs until now, excluded.
    const today = new Date(clock.now().getTime() - 60_000);
    const yesterday = new Date(today.getTime() - 86_400_000);
    const charges: [string, 'compute' | 'model' | 'storage', bigint, Date][] = [
      ['alice', 'compute', 1_234_400_000_000n, yesterday], // 1234.4 cents: each sum shown rounds once
      ['alice', 'model', 567_000_000_000n, yesterday],
      ['bob', 'model', 890_000_000_000n, today],
      ['carol', 'storage', 45_000_000_000n, today],
      ['bob', 'compute', 10_000_000_000n, today],
    ];
    let serial = 0;
    for (const [user, kind, nanocents, at] of charges) {
      await api.pool.query(
        `INSERT INTO usage_ledger (organization_id, session_id, user_id, environment, kind, provider, model, input_tokens, output_tokens, quantity,
           amount_nanocents, currency, billing_mode, occurred_at, dedupe_key)
         VALUES ($1, $2, $3, 'production', $4, 'local', $5, 0, 0, '1', $6, 'usd', 'managed', $7, $8)`,
        [organizationId, `ses_${user}`, user, kind, kind === 'model' ? 'openai/gpt-4o-mini' : null, nanocents.toString(), at, `by-kind/${organizationId}/${serial++}`],
      );
    }
    const usd = (amount: number) => ({ amount, currency: 'usd' });
    const days = await members.viewer!.browser.get('/api/usage/daily-by-kind?period=last_7_days');
    expect(days.status).toBe(200);
    expect(days.body.data).toHaveLength(7);
    expect(days.body.data.slice(-2)).toEqual([
      { date: yesterday.toISOString().slice(0, 10), compute: usd(1234), model: usd(567), storage: usd(0), total: usd(1801) },
      { date: today.toISOString().slice(0, 10), compute: usd(10), model: usd(890), storage: usd(45), total: usd(945) },
    ]);
    expect(days.body.data[0]).toMatchObject({ total: usd(0) });
    expect((await owner.browser.get('/api/usage/daily-by-kind?period=today')).body.data).toEqual([days.body.data[6]]);
    expect((await owner.browser.get('/api/usage/daily-by-kind?mode=test')).body.data.every((day: any) => day.total.amount === 0)).toBe(true);

    const users = await members.viewer!.browser.get('/api/usage/users?period=last_7_days');
    expect(users.body).toEqual({ data: [{ userId: 'alice', cost: usd(1801) }, { userId: 'bob', cost: usd(900) }, { userId: 'carol', cost: usd(45) }] });
    expect((await owner.browser.get('/api/usage/users?period=last_7_days&limit=2')).body.data.map((user: any) => user.userId)).toEqual(['alice', 'bob']);
    expect((await owner.browser.get('/api/usage/users?period=today')).body.data.map((user: any) => user.userId)).toEqual(['bob', 'carol']);
    expect((await owner.browser.get('/api/usage/users?limit=0')).status).toBe(422);
    expect((await owner.browser.get('/api/usage/daily-by-kind?period=year')).status).toBe(422);
  });

  it('resends an ended delivery as its next attempt, refuses a pending one, and audits it', async () => {
    const { owner, organizationId } = await team.organization();
    const live = await keyOf(organizationId);
    const hook = (await live.post('/v1/webhooks', { url: `${receiver.url}/resent`, events: ['agent.completed'] })).body;
    const tested = await live.post(`/v1/webhooks/${hook.id}/test`);
    expect(tested.body.delivered).toBe(true);
    const before = receiver.received.length;
    const resent = await owner.browser.post(`/api/webhooks/${hook.id}/deliveries/${tested.body.deliveryId}/resend`);
    expect(resent.status, JSON.stringify(resent.body)).toBe(200);
    expect(resent.body).toMatchObject({ deliveryId: tested.body.deliveryId, attempt: 2, delivered: true, status: 200, error: null });
    expect(receiver.received.length).toBe(before + 1);
    const again = receiver.received.at(-1)!;
    expect(again.headers['x-svc-delivery']).toBe(tested.body.deliveryId);
    expect(JSON.parse(again.body).data.test).toBe(true);
    const [delivery] = (await live.get(`/v1/webhooks/${hook.id}/deliveries`)).body.data;
    expect(delivery).toMatchObject({ id: tested.body.deliveryId, state: 'succeeded', attempts: 2 });
    expect(delivery.history.map((attempt: { attempt: number }) => attempt.attempt)).toEqual([1, 2]);

    await api.pool.query("UPDATE webhook_deliveries SET state = 'pending' WHERE id = $1", [tested.body.deliveryId]);
    const pending = await live.post(`/v1/webhooks/${hook.id}/deliveries/${tested.body.deliveryId}/resend`);
    expect(pending.status).toBe(409);
    expect(pending.body.error.details.state).toBe('pending');
    expect((await live.post(`/v1/webhooks/${hook.id}/deliveries/del_00000000000000000000000000/resend`)).status).toBe(404);
    const audit = (await owner.browser.get('/api/audit-log')).body.data[0];
    expect(audit).toMatchObject({ action: 'webhook.delivery_resent', target: { type: 'webhook_delivery', id: tested.body.deliveryId }, details: { webhookId: hook.id, attempt: 2, delivered: true } });
  });

  it("reads a definition's versions one by one and rolls it back, audited", async () => {
    const { owner, members, organizationId } = await team.organization(['member']);
    const live = await keyOf(organizationId);
    const created = (await live.post('/v1/agent-definitions', { name: 'writer', systemPrompt: 'You write.', tools: ['exec'] })).body;
    await put(live, `/v1/agent-definitions/${created.id}`, { systemPrompt: 'You write tersely.', config: { temperature: 0.3 }, changelog: 'terser' });
    const first = await members.member!.browser.get(`/api/agent-definitions/${created.id}/versions/1`);
    expect(first.body).toMatchObject({ id: created.id, name: 'writer', version: 1, current: false, changelog: 'created', systemPrompt: 'You write.', config: {} });
    const second = await members.member!.browser.get(`/api/agent-definitions/${created.id}/versions/2`);
    expect(second.body).toMatchObject({ version: 2, current: true, changelog: 'terser', systemPrompt: 'You write tersely.', config: { temperature: 0.3 } });
    expect((await live.get(`/v1/agent-definitions/${created.id}/versions/2`)).body).toEqual(second.body);
    expect((await owner.browser.get(`/api/agent-definitions/${created.id}/versions/3`)).status).toBe(404);
    expect((await owner.browser.get(`/api/agent-definitions/${created.id}/versions/two`)).status).toBe(422);
    expect((await members.member!.browser.post(`/api/agent-definitions/${created.id}/rollback`, { version: 1 })).status).toBe(403);
    expect((await owner.browser.post(`/api/agent-definitions/${created.id}/rollback`, { version: 1 })).body).toEqual({ ok: true, version: 1 });
    expect((await live.get(`/v1/agent-definitions/${created.id}`)).body).toMatchObject({ version: 1, systemPrompt: 'You write.' });
    expect((await owner.browser.get(`/api/agent-definitions/${created.id}/versions/1`)).body.current).toBe(true);
    expect((await owner.browser.get('/api/audit-log')).body.data[0]).toMatchObject({
      action: 'agent_definition.rolled_back',
      target: { type: 'agent_definition', id: created.id },
      details: { mode: 'live', version: 1 },
    });
  });
});

describe('the event log', () => {
  it("lists the organization's events of the mode asked, newest first, by type, in pages", async () => {
    const { owner, members, organizationId } = await team.organization(['viewer']);
    const other = await team.organization();
    const record = (type: 'agent.started' | 'agent.completed', mode: 'live' | 'test', n: number, org = organizationId) =>
      recordEvent(api.pool, { type, organizationId: org, mode, subjectId: `agt_${n}`, data: { agentId: `agt_${n}` }, occurrence: `${org}/${mode}/${type}/${n}` }, clock.now());
    await record('agent.started', 'live', 1);
    await record('agent.completed', 'live', 1);
    await record('agent.started', 'live', 2);
    await record('agent.started', 'test', 3);
    await record('agent.started', 'live', 4, other.organizationId);

    const page = await members.viewer!.browser.get('/api/events?limit=2');
    expect(page.status).toBe(200);
    expect(page.body.data.map((event: any) => [event.event, event.subjectId])).toEqual([
      ['agent.started', 'agt_2'],
      ['agent.completed', 'agt_1'],
    ]);
    expect(page.body.data[0]).toEqual({ id: expect.stringMatching(/^evt_/), event: 'agent.started', subjectId: 'agt_2', createdAt: clock.now().toISOString(), data: { agentId: 'agt_2' } });
    const next = await members.viewer!.browser.get(`/api/events?limit=2&cursor=${encodeURIComponent(page.body.nextCursor)}`);
    expect(next.body).toEqual({ data: [expect.objectContaining({ event: 'agent.started', subjectId: 'agt_1' })], hasMore: false });
    expect((await owner.browser.get('/api/events?type=agent.started')).body.data.map((event: any) => event.subjectId)).toEqual(['agt_2', 'agt_1']);
    expect((await owner.browser.get('/api/events?mode=test')).body.data.map((event: any) => event.subjectId)).toEqual(['agt_3']);
    expect((await other.owner.browser.get('/api/events')).body.data.map((event: any) => event.subjectId)).toEqual(['agt_4']);
    // A cursor of one list is refused on another.
    expect((await owner.browser.get(`/api/events?mode=test&cursor=${encodeURIComponent(page.body.nextCursor)}`)).status).toBe(422);
    expect((await owner.browser.get('/api/events?type=agent.exploded')).status).toBe(422);
  });
});

describe('the audit log', () => {
  it('records who did what to what, newest first, in pages, without secrets', async () => {
    const { owner, members } = await team.organization(['admin']);
    const key = await members.admin!.browser.post('/api/keys', { label: 'audited', mode: 'live' });
    clock.advance(1000);
    const hook = await owner.browser.post('/api/webhooks', { url: `${receiver.url}/audited`, events: ['agent.completed'], secret: 'a-secret-of-sixteen-or-more' });
    clock.advance(1000);
    await owner.browser.put('/api/plan', { plan: 'pro' });
    clock.advance(1000);
    await members.admin!.browser.delete(`/api/keys/${key.body.id}`);

    const page = await owner.browser.get('/api/audit-log?limit=3');
    expect(page.status).toBe(200);
    expect(page.body.data.map((entry: { action: string }) => entry.action)).toEqual(['api_key.revoked', 'plan.changed', 'webhook.created']);
    expect(page.body.data[0]).toMatchObject({
      actor: { type: 'user', id: members.admin!.userId },
      target: { type: 'api_key', id: key.body.id },
      details: { prefix: key.body.prefix, mode: 'live', label: 'audited' },
      at: clock.now().toISOString(),
    });
    expect(page.body.data[1]).toMatchObject({ actor: { type: 'user', id: owner.userId }, details: { from: null, to: 'pro' } });
    expect(page.body.data[2]).toMatchObject({ target: { type: 'webhook', id: hook.body.id }, details: { mode: 'live', url: `${receiver.url}/audited` } });
    expect(page.body.hasMore).toBe(true);
    const next = await owner.browser.get(`/api/audit-log?limit=3&cursor=${encodeURIComponent(page.body.nextCursor)}`);
    // The admin's invite that built the organization is the oldest.
    expect(next.body.data.map((entry: { action: string }) => entry.action)).toEqual(['api_key.created', 'member.invited']);
    expect(next.body.hasMore).toBe(false);

    const everything = JSON.stringify([page.body, next.body]);
    expect(everything).not.toContain(key.body.key);
    expect(everything).not.toContain('a-secret-of-sixteen-or-more');
    expect((await owner.browser.get('/api/audit-log?cursor=forged')).status).toBe(422);
  });
});

describe('the audit log of secrets', () => {
  it('names the secrets set and deleted, never their values', async () => {
    const { owner, members } = await team.organization(['member']);
    expect((await members.member!.browser.post('/api/secrets', { SHARED_TOKEN: 'value-that-stays-secret' })).status).toBe(200);
    expect((await members.member!.browser.delete('/api/secrets/SHARED_TOKEN')).status).toBe(403);
    expect((await owner.browser.delete('/api/secrets/SHARED_TOKEN')).status).toBe(200);
    const log = (await owner.browser.get('/api/audit-log')).body.data;
    expect(log.slice(0, 2).map((entry: any) => [entry.action, entry.actor.id, entry.target.id, entry.details])).toEqual([
      ['secret.deleted', owner.userId, 'SHARED_TOKEN', { mode: 'live' }],
      ['secrets.set', members.member!.userId, 'organization', { mode: 'live', names: ['SHARED_TOKEN'] }],
    ]);
    expect(JSON.stringify(log)).not.toContain('value-that-stays-secret');
  });
});

describe('the audit log of the team', () => {
  it('records invites, role changes, removals and transfers with who made them', async () => {
    const { owner, members } = await team.organization(['admin', 'member']);
    const invitee = await team.person('invitee');
    const invite = await members.admin!.browser.post('/api/team', { userId: invitee.userId, role: 'viewer' });
    await owner.browser.patch(`/api/team/${members.member!.memberId}`, { role: 'viewer' });
    await members.admin!.browser.delete(`/api/team/${invite.body.id}`);
    await owner.browser.post('/api/team/transfer', { newOwnerId: members.admin!.memberId });

    const log = (await members.admin!.browser.get('/api/audit-log?limit=100')).body.data;
    const summary = log.map((entry: any) => [entry.action, entry.actor.id, entry.target.id]);
    expect(summary.slice(0, 4)).toEqual([
      ['ownership.transferred', owner.userId, members.admin!.memberId],
      ['member.removed', members.admin!.userId, invite.body.id],
      ['member.role_changed', owner.userId, members.member!.memberId],
      ['member.invited', members.admin!.userId, invite.body.id],
    ]);
    expect(log[2].details).toEqual({ userId: members.member!.userId, from: 'member', to: 'viewer' });
    // The invites that built the organization are there too, oldest last.
    expect(log.slice(4).map((entry: any) => entry.action)).toEqual(['member.invited', 'member.invited']);
  });
});

describe('two organizations', () => {
  it('never see or change each other on these routes', async () => {
    const a = await team.organization();
    const b = await team.organization();
    const aKey = (await a.owner.browser.post('/api/keys', { label: 'a', mode: 'live' })).body;
    const aLive = apiClient(api.baseUrl, aKey.key);
    const aSession = (await aLive.post('/v1/sessions', { userId: 'frank' })).body;
    const aHook = (await a.owner.browser.post('/api/webhooks', { url: `${receiver.url}/a`, events: ['agent.completed'] })).body;
    await a.owner.browser.put('/api/session-defaults', { sessionDefaults: { maxAgents: 1 } });

    expect((await b.owner.browser.get('/api/keys')).body.data).toEqual([]);
    expect((await b.owner.browser.delete(`/api/keys/${aKey.id}`)).status).toBe(404);
    expect((await aLive.get('/v1/sessions')).status).toBe(200);
    expect((await b.owner.browser.get(`/api/webhooks/${aHook.id}`)).status).toBe(404);
    expect((await b.owner.browser.delete(`/api/webhooks/${aHook.id}`)).status).toBe(404);
    expect((await b.owner.browser.get(`/api/sessions/${aSession.id}`)).status).toBe(404);
    expect((await b.owner.browser.get('/api/sessions')).body.data).toEqual([]);
    expect((await b.owner.browser.get('/api/session-defaults')).body).toEqual({ sessionDefaults: {} });
    expect((await b.owner.browser.get('/api/audit-log')).body.data).toEqual([]);
    expect((await b.owner.browser.get('/api/organization')).body.id).toBe(b.organizationId);
  });
});
