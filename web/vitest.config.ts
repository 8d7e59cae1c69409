import { defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';

// The SDK from its TypeScript sources (its "source" export condition), as in the app's build.
const resolve = { conditions: ['source', ...defaultServerConditions] };

export default defineConfig({
  resolve,
  ssr: { resolve: { conditions: resolve.conditions, externalConditions: ['source'] } },
  test: {
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/**/*.test.{ts,tsx}'], environment: 'node' },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['e2e/**/*.test.ts'],
          // Real server processes and one Chromium: files run one after another (two cores).
          pool: 'forks',
          maxWorkers: 1,
          fileParallelism: false,
          // Bounds against hangs, not performance thresholds.
          testTimeout: 120_000,
          // Starting two instances on a 2-core machine shared with other heavy jobs can take longer: raise with
          // HERALD_E2E_HOOK_TIMEOUT_MS there (and HERALD_TEST_START_TIMEOUT_MS for the instances' start).
          hookTimeout: Number(process.env.HERALD_E2E_HOOK_TIMEOUT_MS) || 180_000,
          globalSetup: ['e2e/global-setup.ts'],
        },
      },
    ],
  },
});
