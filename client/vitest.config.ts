import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.{ts,tsx}'],
    pool: 'forks',
    // Two cores shared with the server's suite and other work.
    maxWorkers: 2,
    // Bounds against hangs, not performance thresholds.
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
