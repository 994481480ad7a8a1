import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium, installed by `make host` (sandbox-images/local/install-host.sh); never a downloaded browser. */
export const CHROMIUM = process.env.BERTH_TEST_CHROMIUM ?? '/usr/bin/chromium';

/** Headless Chromium driven over the DevTools protocol by playwright-core. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: make host installs Debian's chromium`);
  // As root (the tests run as root for runsc), Chromium's own sandbox cannot start.
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
}
