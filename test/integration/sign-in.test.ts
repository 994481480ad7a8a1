import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, revokeUserSignInSessions } from '../../common/src/index.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { Browser } from '../helpers/browser.js';
import { IdleProvider } from '../helpers/fake-providers.js';
import { startIdentityProvider, type TestIdentityProvider } from '../helpers/oidc.js';
import { parsePrometheus } from '../helpers/prometheus.js';

/**
 * Sign-in through a real OpenID Connect provider (oidc-provider, on a local port) with a browser
 * that follows every redirect and keeps cookies: authorization code with PKCE, the session cookie,
 * CSRF, sign-out, server-side revocation, and who gets which organization at first sign-in.
 */
let api: TestApi;
let idp: TestIdentityProvider;
let baseUrl: string;
const metrics = new Registry();
const clock = new ManualClock('2026-11-01T09:00:00Z');

beforeAll(async () => {
  api = await startTestApi({ clock, providers: new ProviderRegistry([new IdleProvider()], 'idle') });
  idp = await startIdentityProvider();
  const started = await api.another({
    metrics,
    management: { oidc: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, allowHttp: true }, signup: 'invite' },
  });
  baseUrl = started.baseUrl;
  idp.redirectUris.push(`${baseUrl}/api/auth/callback`);
});
afterAll(async () => {
  await idp?.close();
  await api?.close();
});

async function signInAs(subject: string, returnTo?: string): Promise<{ browser: Browser; landing: Awaited<ReturnType<Browser['get']>> }> {
  idp.nextLogin = subject;
  const browser = new Browser(baseUrl);
  const landing = await browser.get(`/api/auth/login${returnTo ? `?returnTo=${encodeURIComponent(returnTo)}` : ''}`);
  return { browser, landing };
}

describe('sign-in with an OpenID Connect provider', () => {
  it('goes through the provider with PKCE and lands signed in, with an http-only SameSite=Lax cookie', async () => {
    const { browser, landing } = await signInAs('alice');
    expect(landing.status).toBe(200);
    // Berth → the provider's /auth → its login page → back to /auth → Berth's callback → /api/me.
    const hosts = landing.visited.map((url) => new URL(url).origin);
    expect(hosts[0]).toBe(baseUrl);
    expect(hosts).toContain(idp.issuer);
    expect(new URL(landing.visited.at(-2)!).pathname).toBe('/api/auth/callback');
    expect(new URL(landing.visited.at(-1)!).pathname).toBe('/api/me');
    const authorize = idp.authorizationRequests.at(-1)!;
    expect(authorize.get('code_challenge_method')).toBe('S256');
    expect(authorize.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(authorize.get('state')).toBeTruthy();
    expect(authorize.get('nonce')).toBeTruthy();
    expect(authorize.get('redirect_uri')).toBe(`${baseUrl}/api/auth/callback`);

    expect(landing.body.user).toEqual({ id: expect.stringMatching(/^usr_/), email: 'alice@example.com', name: 'Alice' });
    // The first person to sign in to the install owns its first organization.
    expect(landing.body.organization).toMatchObject({ role: 'owner' });
    const cookie = browser.cookie('berth_session')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/', secure: false });
    expect(browser.cookie('berth_csrf')).toMatchObject({ httpOnly: false, value: landing.body.csrfToken });
    // The transaction cookie is spent.
    expect(browser.cookie('berth_oidc')).toBeUndefined();
  });

  it('returns to the path asked for, never to another site', async () => {
    expect(new URL((await signInAs('alice', '/api/team')).landing.visited.at(-1)!).pathname).toBe('/api/team');
    const away = await signInAs('alice', '//evil.example/x');
    expect(away.landing.visited.at(-1)).toBe(`${baseUrl}/api/me`);
  });

  it('refuses a callback without the browser that started it, or with a changed state', async () => {
    // Another browser presents a real code and state: the transaction cookie is not there.
    idp.nextLogin = 'mallory';
    const victim = new Browser(baseUrl);
    const toProvider = await victim.get('/api/auth/login', { followRedirects: false });
    expect(toProvider.status).toBe(302);
    // Walk the provider's redirects by hand up to the callback URL.
    let location = toProvider.headers.get('location')!;
    for (let hop = 0; hop < 10 && !location.startsWith(`${baseUrl}/api/auth/callback`); hop++) {
      const step = await victim.get(location, { followRedirects: false });
      location = new URL(step.headers.get('location')!, location).href;
    }
    expect(location.startsWith(`${baseUrl}/api/auth/callback`)).toBe(true);
    const attacker = new Browser(baseUrl);
    const stolen = await attacker.get(location);
    expect([stolen.status, stolen.body.error.code, stolen.body.error.details.reason]).toEqual([401, 'unauthorized', 'no_transaction']);
    // The right browser with a state that was changed on the way.
    const changed = new URL(location);
    changed.searchParams.set('state', 'not-the-state');
    const tampered = await victim.get(changed.href);
    expect([tampered.status, tampered.body.error.code, tampered.body.error.details.reason]).toEqual([401, 'unauthorized', 'exchange']);
    expect(victim.cookie('berth_session')).toBeUndefined();
  });

  it("answers a provider's refusal with 401 naming it", async () => {
    const browser = new Browser(baseUrl);
    expect((await browser.get('/api/auth/login', { followRedirects: false })).status).toBe(302);
    const refused = await browser.get('/api/auth/callback?error=access_denied&state=whatever');
    expect([refused.status, refused.body.error.code, refused.body.error.details]).toEqual([401, 'unauthorized', { reason: 'provider', error: 'access_denied' }]);
    expect(browser.cookie('berth_session')).toBeUndefined();
  });

  it('refuses a state-changing request without the CSRF token, and takes it with the token', async () => {
    const { browser } = await signInAs('alice');
    const bob = await signInAs('bob');
    const bobId = bob.landing.body.user.id;
    const none = await browser.post('/api/team', { userId: bobId });
    expect([none.status, none.body.error.code, none.body.error.details.reason]).toEqual([403, 'forbidden', 'csrf']);
    const wrong = await browser.post('/api/team', { userId: bobId }, { headers: { 'x-csrf-token': 'guessed' } });
    expect([wrong.status, wrong.body.error.details.reason]).toEqual([403, 'csrf']);
    // Nothing was written.
    expect((await browser.get('/api/team')).body.members).toHaveLength(1);
    await browser.loadCsrfToken();
    expect((await browser.post('/api/team', { userId: bobId })).status).toBe(201);
  });

  it('puts a second person, who has no invite, in no organization until invited (signup: invite)', async () => {
    const { landing, browser } = await signInAs('carol');
    expect(landing.body.organization).toBeNull();
    expect(landing.body.organizations).toEqual([]);
    const team = await browser.get('/api/team');
    expect([team.status, team.body.error.code, team.body.error.details.reason]).toEqual([403, 'forbidden', 'no_organization']);
  });

  it('signs out: the session is revoked on the server, so a copy of the cookie no longer works', async () => {
    const { browser } = await signInAs('alice');
    await browser.loadCsrfToken();
    const copy = new Browser(baseUrl);
    copy.cookies.set(new URL(baseUrl).host, new Map(browser.cookies.get(new URL(baseUrl).host)));
    expect((await copy.get('/api/me')).status).toBe(200);
    const out = await browser.post('/api/auth/logout');
    expect(out.body).toEqual({ ok: true });
    expect(browser.cookie('berth_session')).toBeUndefined();
    const after = await copy.get('/api/me');
    expect([after.status, after.body.error.code]).toEqual([401, 'unauthorized']);
  });

  it('ends every session of a user revoked server-side at their next request', async () => {
    const { browser, landing } = await signInAs('alice');
    expect((await browser.get('/api/me')).status).toBe(200);
    expect(await revokeUserSignInSessions(api.pool, landing.body.user.id, clock.now())).toBeGreaterThan(0);
    expect((await browser.get('/api/me')).status).toBe(401);
    // The next sign-in clears the ended sessions away.
    await signInAs('alice');
    const { rows } = await api.pool.query<{ live: string; ended: string }>(
      'SELECT count(*) FILTER (WHERE revoked_at IS NULL) AS live, count(*) FILTER (WHERE revoked_at IS NOT NULL) AS ended FROM sign_in_sessions WHERE user_id = $1',
      [landing.body.user.id],
    );
    expect(rows[0]).toEqual({ live: '1', ended: '0' });
  });

  it('refuses a cookie whose signature does not match', async () => {
    const { browser } = await signInAs('alice');
    const jar = browser.cookies.get(new URL(baseUrl).host)!;
    const cookie = jar.get('berth_session')!;
    jar.set('berth_session', { ...cookie, value: `${cookie.value.slice(0, -2)}xx` });
    expect((await browser.get('/api/me')).status).toBe(401);
  });

  it('counts sign-ins by result and the live sessions', async () => {
    const text = await metrics.metrics();
    const samples = parsePrometheus(text);
    const success = samples.find((sample) => sample.name === 'berth_sign_ins_total' && sample.labels.method === 'oidc' && sample.labels.result === 'success');
    const failure = samples.find((sample) => sample.name === 'berth_sign_ins_total' && sample.labels.method === 'oidc' && sample.labels.result === 'failure');
    expect(success?.value).toBeGreaterThanOrEqual(8);
    expect(failure?.value).toBeGreaterThanOrEqual(2);
    const active = samples.find((sample) => sample.name === 'berth_sign_in_sessions_active');
    expect(active?.value).toBeGreaterThan(0);
  });
});

describe('signup: organization', () => {
  it('gives everyone without a membership an organization of their own, as owner', async () => {
    const own = await api.another({
      management: { oidc: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, allowHttp: true }, signup: 'organization' },
    });
    idp.redirectUris.push(`${own.baseUrl}/api/auth/callback`);
    idp.nextLogin = 'dave';
    const browser = new Browser(own.baseUrl);
    const landing = await browser.get('/api/auth/login');
    expect(landing.status).toBe(200);
    expect(landing.body.organization).toMatchObject({ name: 'dave@example.com', role: 'owner' });
  });
});

describe('cookies over https', () => {
  it('are Secure when the dashboard is served over https', async () => {
    const secure = await api.another({ management: { dashboardUrl: 'https://berth.example.com' } });
    const browser = new Browser(secure.baseUrl);
    const response = await browser.get('/api/auth/link?token=unknown', { followRedirects: false });
    expect(response.status).toBe(401);
    const { rows } = await api.pool.query<{ id: string }>('SELECT id FROM users LIMIT 1');
    const { createSignInLink } = await import('../../common/src/index.js');
    const token = await createSignInLink(api.pool, rows[0]!.id, 60_000, clock.now());
    const signedIn = await browser.get(`/api/auth/link?token=${token}`, { followRedirects: false });
    expect(signedIn.status).toBe(302);
    expect(browser.cookie('berth_session')).toMatchObject({ secure: true, httpOnly: true, sameSite: 'Lax' });
    // A link works once.
    const again = await new Browser(secure.baseUrl).get(`/api/auth/link?token=${token}`, { followRedirects: false });
    expect([again.status, again.body.error.code]).toEqual([401, 'unauthorized']);
  });
});
