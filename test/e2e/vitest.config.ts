import { defineConfig } from 'vitest/config';

/** The end-to-end suite, run only by `make e2e-kind` against a cluster it created. */
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 300_000,
    fileParallelism: false,
  },
});
