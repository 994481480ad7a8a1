import { startBerth, type BerthProcess } from './berth.js';
import { startWildcardFront, type WildcardFront } from './e2b-tls.js';
import { createTestDatabase } from './postgres.js';
import { removeDataDir } from './runsc.js';

export interface E2bBerth {
  berth: BerthProcess;
  /** A live key of the install (the SDKs get it in the `e2b_` form E2B's docs show). */
  key: string;
  /** Ends the front and `berth up` and removes what they made; `berth up`'s exit code. */
  stop(): Promise<number | null>;
}

/**
 * A `berth up` with the E2B-compatible surface on `domain`, the SDKs' documented environment
 * pointed at it (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY), and a wildcard TLS front for the SDKs
 * that only know host names.
 */
export async function startE2bBerth(domain: string): Promise<E2bBerth> {
  const databaseUrl = await createTestDatabase();
  const berth = await startBerth({ env: { DATABASE_URL: databaseUrl, BERTH_E2B_DOMAIN: domain } });
  const key = berth.liveKey!;
  process.env.E2B_API_URL = `${berth.baseUrl}/e2b`;
  process.env.E2B_SANDBOX_URL = berth.baseUrl;
  process.env.E2B_API_KEY = `e2b_${key}`;
  const front: WildcardFront = await startWildcardFront(domain, berth.baseUrl);
  return {
    berth,
    key,
    async stop() {
      await front.close();
      const code = await berth.stop();
      removeDataDir(berth.dataDir);
      return code;
    },
  };
}
