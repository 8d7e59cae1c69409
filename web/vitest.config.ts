import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: { name: 'unit', include: ['test/**/*.test.{ts,tsx}'], environment: 'node' },
      },
      {
        test: {
          name: 'e2e',
          include: ['e2e/**/*.test.ts'],
          // Real server processes and one Chromium: files run one after another (two cores).
          pool: 'forks',
          maxWorkers: 1,
          fileParallelism: false,
          // Bounds against hangs, not performance thresholds.
          testTimeout: 120_000,
          hookTimeout: 180_000,
          globalSetup: ['e2e/global-setup.ts'],
        },
      },
    ],
  },
});
