import { existsSync } from 'node:fs';
import path from 'node:path';
import { defineConfig } from 'vitest/config';

const shared = {
  testTimeout: 30_000,
  hookTimeout: 30_000,
  pool: 'forks' as const,
};

/** The coding-agent harness tests run real harness processes, a few hundred MB and a core each. */
const HARNESSES = 'test/harnesses/**/*.test.ts';
/** The console's tests drive a real Chromium: one file at a time, once (the store is tested on both engines elsewhere). */
const CONSOLE = 'test/console/**/*.test.ts';

/**
 * The suite runs on SQLite always, and again on PostgreSQL when AGENTD_TEST_DATABASE_URL names a
 * server (each test file then gets a schema of its own there: test/support/database.ts).
 *
 * Where turns run depends on the server thread's load (AGENTD_TURN_WORKERS_LOAD), which a test
 * must not: each run pins it, so the whole suite goes through both places. On SQLite every turn
 * runs on the server's thread, as at low load; on PostgreSQL every turn runs on a turn thread.
 *
 * The harness tests run in a group of their own, after the rest: beside them, on two cores, the
 * tests that wait on timers of a second or less (a relayed turn's silence, model timeouts) starve.
 * The console's browser tests come last, alone, for the same reason.
 */
const engines = [
  { name: 'sqlite', env: { AGENTD_TEST_ENGINE: 'sqlite', AGENTD_TURN_WORKERS_LOAD: '1' } },
  ...(process.env.AGENTD_TEST_DATABASE_URL ? [{ name: 'postgres', env: { AGENTD_TEST_ENGINE: 'postgres', AGENTD_TURN_WORKERS_LOAD: '0' } }] : []),
];

/** PgBouncer's binary (Debian puts it in /usr/sbin, often off a user's PATH). */
function pgbouncer(): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/usr/local/sbin'];
  return dirs.map((dir) => path.join(dir, 'pgbouncer')).find((file) => existsSync(file));
}

/**
 * The replica tests run a third time with their pool behind PgBouncer in transaction mode and the
 * LISTEN connection direct (docs/deployment.md), when PostgreSQL and PgBouncer are both there.
 */
const pooled = process.env.AGENTD_TEST_DATABASE_URL ? pgbouncer() : undefined;
if (process.env.AGENTD_TEST_DATABASE_URL && !pooled) console.warn('pgbouncer not found: the replica tests do not run behind it (Debian: apt install pgbouncer)');

export default defineConfig({
  test: {
    projects: engines.flatMap(({ name, env }) => [
      { test: { ...shared, name, env, include: ['test/**/*.test.ts'], exclude: [HARNESSES, CONSOLE], sequence: { groupOrder: 0 } } },
      { test: { ...shared, name: `${name}-harnesses`, env, include: [HARNESSES], fileParallelism: false, sequence: { groupOrder: 1 } } },
    ])
      .concat(
        pooled
          ? [
              {
                test: {
                  ...shared,
                  name: 'pgbouncer',
                  env: { AGENTD_TEST_ENGINE: 'postgres', AGENTD_TURN_WORKERS_LOAD: '0', AGENTD_TEST_PGBOUNCER: pooled },
                  include: ['test/replicas/**/*.test.ts'],
                  globalSetup: ['test/support/pgbouncer-setup.ts'],
                  sequence: { groupOrder: 1 },
                },
              },
            ]
          : [],
      )
      .concat({ test: { ...shared, testTimeout: 60_000, name: 'console', env: engines[0]!.env, include: [CONSOLE], fileParallelism: false, sequence: { groupOrder: 2 } } }),
  },
});
