import { defineConfig } from 'vitest/config';

const shared = {
  include: ['test/**/*.test.ts'],
  testTimeout: 30_000,
  hookTimeout: 30_000,
  pool: 'forks' as const,
};

/**
 * The suite runs on SQLite always, and again on PostgreSQL when AGENTD_TEST_DATABASE_URL names a
 * server (each test file then gets a schema of its own there: test/support/database.ts).
 */
export default defineConfig({
  test: {
    projects: [
      { test: { ...shared, name: 'sqlite', env: { AGENTD_TEST_ENGINE: 'sqlite' } } },
      ...(process.env.AGENTD_TEST_DATABASE_URL ? [{ test: { ...shared, name: 'postgres', env: { AGENTD_TEST_ENGINE: 'postgres' } } }] : []),
    ],
  },
});
