import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBerth, startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { Browser } from '../helpers/browser.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Embedded mode without an identity provider, through real `berth up` processes: the first start
 * prints a one-time sign-in link for the first owner, `berth admin login` prints new ones, and a
 * link signs a browser in once.
 */
const dataDir = tempDir('berth-embedded-sign-in-');
let databaseUrl: string;
let berth: BerthProcess;

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  berth = await startBerth({ dataDir, env: { DATABASE_URL: databaseUrl } });
});
afterAll(async () => {
  await berth?.stop();
  removeDataDir(dataDir);
});

const linkIn = (text: string) => /sign-in link: (\S+)/.exec(text)?.[1];

describe('embedded sign-in', () => {
  it('prints a one-time link for the first owner on first start; it signs in once, as owner of the first organization', async () => {
    const link = linkIn(berth.stdout());
    expect(link).toMatch(new RegExp(`^${berth.baseUrl}/api/auth/link\\?token=[A-Za-z0-9_-]{43}$`));
    const browser = new Browser(berth.baseUrl);
    const me = await browser.get(link!);
    expect(me.status).toBe(200);
    expect(me.body.organization).toMatchObject({ name: 'default', role: 'owner' });
    expect(me.body.user.name).toBe('Owner');
    await browser.loadCsrfToken();
    const team = await browser.get('/api/team');
    expect(team.body).toMatchObject({ currentRole: 'owner', members: [{ role: 'owner', pending: false }] });
    // Once only.
    const again = await new Browser(berth.baseUrl).get(link!);
    expect([again.status, again.body.error.code]).toEqual([401, 'unauthorized']);
  });

  it('prints no link on later starts; `berth admin login` prints a new one beside the running server', async () => {
    expect(await berth.stop()).toBe(0);
    berth = await startBerth({ dataDir, env: { DATABASE_URL: databaseUrl } });
    expect(linkIn(berth.stdout())).toBeUndefined();
    const port = new URL(berth.baseUrl).port;
    const login = await runBerth(['admin', 'login', '--data-dir', dataDir, '--port', port], { DATABASE_URL: databaseUrl });
    expect(login.code).toBe(0);
    const link = linkIn(login.stdout)!;
    expect(link.startsWith(`${berth.baseUrl}/api/auth/link?token=`)).toBe(true);
    const browser = new Browser(berth.baseUrl);
    const me = await browser.get(link);
    expect(me.body.organization).toMatchObject({ role: 'owner' });
    // The same owner as the first link's.
    const second = await runBerth(['admin', 'login', '--data-dir', dataDir, '--port', port], { DATABASE_URL: databaseUrl });
    const other = await new Browser(berth.baseUrl).get(linkIn(second.stdout)!);
    expect(other.body.user.id).toBe(me.body.user.id);
  });

  it('refuses half an identity-provider configuration at start, naming what is missing', async () => {
    const result = await runBerth(['up', '--port', '0', '--data-dir', tempDir('berth-oidc-config-')], {
      DATABASE_URL: databaseUrl,
      BERTH_OIDC_ISSUER: 'https://id.example.com',
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('BERTH_OIDC_CLIENT_ID and BERTH_OIDC_CLIENT_SECRET');
  });
});
