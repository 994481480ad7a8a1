import { defineConfig } from 'vitest/config';

/**
 * Test tiers. `unit`: pure code, no processes, seconds. `integration`: a real PostgreSQL
 * server, real `berth up` processes over HTTP, real gVisor sandboxes. `browser`: the chat widget
 * in Debian's headless Chromium, driven by playwright-core, against a real `berth up`. `chart`: the Helm chart
 * through the real helm binary. `cluster`: a real kube-apiserver, etcd, scheduler,
 * controller-manager and KWOK nodes, with Berth's operator and API server against them. `node`: the
 * same control plane with a real node (kubelet, containerd, gVisor) where sandbox pods really run.
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
          include: ['{crds,common,providers,operator,apiserver,sdk,widget,dashboard}/src/**/*.test.ts'],
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
      {
        extends: true,
        test: {
          name: 'browser',
          include: ['test/browser/**/*.test.ts'],
          sequence: { groupOrder: 2 },
          // The real berth processes need the build and the PostgreSQL server of the integration tier.
          globalSetup: ['test/setup/global.ts'],
          testTimeout: 120_000,
          hookTimeout: 300_000,
          maxWorkers: 1,
        },
      },
      {
        extends: true,
        test: {
          name: 'chart',
          include: ['test/chart/**/*.test.ts'],
          sequence: { groupOrder: 3 },
          testTimeout: 60_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'cluster',
          include: ['test/cluster-tier/**/*.test.ts'],
          globalSetup: ['test/setup/cluster.ts'],
          sequence: { groupOrder: 4 },
          testTimeout: 180_000,
          hookTimeout: 600_000,
          // One control plane at a time: two would starve each other on two cores.
          maxWorkers: 1,
        },
      },
      {
        extends: true,
        test: {
          name: 'node',
          include: ['test/node-tier/**/*.test.ts'],
          globalSetup: ['test/setup/node.ts'],
          sequence: { groupOrder: 4 },
          testTimeout: 240_000,
          hookTimeout: 600_000,
          // One real node per machine.
          maxWorkers: 1,
        },
      },
    ],
  },
});
