import { systemClock, type BerthConfig, type Pool } from '@berth/common';
import { embeddedOwnerLink } from '../management/sign-in.js';
import { bootstrap } from './bootstrap.js';

export function signInLinkUrl(baseUrl: string, token: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/api/auth/link?token=${token}`;
}

/** `berth admin login`: a new one-time sign-in link for the owner of the install's first organization. */
export async function adminLoginCommand(pool: Pool, config: BerthConfig, out: (line: string) => void): Promise<void> {
  const { organization } = await bootstrap(pool, { createKeys: false });
  const { token } = await embeddedOwnerLink(pool, organization.id, systemClock.now());
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const baseUrl = config.dashboardUrl ?? config.publicUrl ?? `http://${host.includes(':') ? `[${host}]` : host}:${config.port}`;
  out(`sign-in link: ${signInLinkUrl(baseUrl, token)}`);
  out('It signs one browser in as the owner, once, within 24 hours.');
}
