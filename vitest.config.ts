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
 *
 * Where turns run depends on the server thread's load (AGENTD_TURN_WORKERS_LOAD), which a test
 * must not: each run pins it, so the whole suite goes through both places. On SQLite every turn
 * runs on the server's thread, as at low load; on PostgreSQL every turn runs on a turn thread.
 */
export default defineConfig({
  test: {
    projects: [
      { test: { ...shared, name: 'sqlite', env: { AGENTD_TEST_ENGINE: 'sqlite', AGENTD_TURN_WORKERS_LOAD: '1' } } },
      ...(process.env.AGENTD_TEST_DATABASE_URL
        ? [{ test: { ...shared, name: 'postgres', env: { AGENTD_TEST_ENGINE: 'postgres', AGENTD_TURN_WORKERS_LOAD: '0' } } }]
        : []),
    ],
  },
});
