import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    // Two cores: a little over-subscription keeps them busy while tests wait on I/O.
    maxWorkers: 3,
    // Bounds against hangs, not performance thresholds: CI machines are shared and noisy.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 20_000,
    globalSetup: ['test/helpers/global-setup.ts'],
  },
});
