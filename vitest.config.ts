import { defineConfig } from 'vitest/config';

/**
 * Two tiers. `unit`: pure code, no processes, seconds. `integration`: a real PostgreSQL
 * server, real `berth up` processes over HTTP, real gVisor sandboxes.
 */
export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'] } },
  test: {
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['{crds,common,operator,apiserver}/src/**/*.test.ts'],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          sequence: { groupOrder: 1 },
          globalSetup: ['test/setup/global.ts'],
          testTimeout: 120_000,
          hookTimeout: 300_000,
          // Two cores: files run two at a time, each with its own database and Berth processes.
          maxWorkers: 2,
        },
      },
    ],
  },
});
