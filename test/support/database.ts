import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';

/**
 * The database a test's store opens. SQLite (the default) needs nothing; with
 * AGENTD_TEST_DATABASE_URL set, each call makes a schema of its own on that PostgreSQL server, so
 * test files run side by side without seeing each other's rows, and `drop` removes it.
 */
export interface TestDatabase {
  /** undefined: the SQLite file in the data folder. */
  url: string | undefined;
  /** Behind PgBouncer: the direct URL the LISTEN connection takes (AGENTD_DATABASE_LISTEN_URL). */
  listenUrl?: string | undefined;
  drop(): Promise<void>;
}

/** Set in the `postgres` project of vitest.config.ts only, so the same file runs on both engines. */
export const TEST_POSTGRES_URL = process.env.AGENTD_TEST_ENGINE === 'postgres' ? process.env.AGENTD_TEST_DATABASE_URL || undefined : undefined;

/** Set in the `pgbouncer` project: the pooler in transaction mode its global setup started. */
const PGBOUNCER_URL = process.env.AGENTD_TEST_PGBOUNCER ? inject('pgbouncerUrl') : undefined;

export async function freshDatabase(): Promise<TestDatabase> {
  if (!TEST_POSTGRES_URL) return { url: undefined, drop: async () => {} };
  if (PGBOUNCER_URL) return freshPooledDatabase(TEST_POSTGRES_URL, PGBOUNCER_URL);
  return schemaMadeBy((schema) => `CREATE SCHEMA ${schema}`);
}

/** Runs SQL on its own connection to the server at `serverUrl`. */
async function onServer(serverUrl: string, statements: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(statements);
  } finally {
    await client.end();
  }
}

/** A schema of a fresh name on the test server, made by the SQL `make` gives for that name. */
async function schemaMadeBy(make: (schema: string) => string): Promise<TestDatabase> {
  const server = TEST_POSTGRES_URL!;
  const schema = `t_${randomBytes(6).toString('hex')}`;
  await onServer(server, make(schema));
  const url = new URL(server);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return { url: url.toString(), drop: () => onServer(server, `DROP SCHEMA ${schema} CASCADE`) };
}

/**
 * A fresh schema holding what a `pg_dump --schema=<dumpSchema> --inserts` wrote (the schema's name
 * in it rewritten), so a test can open data an older agentd left on PostgreSQL.
 */
export async function restoredDatabase(dump: string, dumpSchema: string): Promise<TestDatabase> {
  if (!TEST_POSTGRES_URL) throw new Error('restoredDatabase needs AGENTD_TEST_DATABASE_URL');
  return schemaMadeBy((schema) => dump.replaceAll(dumpSchema, schema));
}

/**
 * Everything a store holds, as searchable text: on SQLite the bytes of the database file and its
 * WAL (what a stolen disk would show); on PostgreSQL every row of every table of its schema.
 */
export async function storedContent(where: { dataDir: string; databaseUrl: string | undefined }): Promise<{ source: string; text: string }[]> {
  if (!where.databaseUrl) {
    const files = (await readdir(where.dataDir)).filter((f) => f.startsWith('agentd.db'));
    if (!files.includes('agentd.db')) throw new Error(`no agentd.db in ${where.dataDir}`);
    return Promise.all(files.map(async (file) => ({ source: file, text: (await readFile(path.join(where.dataDir, file))).toString('latin1') })));
  }
  const client = new pg.Client({ connectionString: where.databaseUrl });
  await client.connect();
  try {
    const { rows: tables } = await client.query<{ table_name: string }>('select table_name from information_schema.tables where table_schema = current_schema()');
    if (tables.length === 0) throw new Error('the test schema has no tables');
    const dumps = [];
    for (const { table_name } of tables) {
      const { rows } = await client.query(`select * from "${table_name}"`);
      dumps.push({ source: table_name, text: JSON.stringify(rows) });
    }
    return dumps;
  } finally {
    await client.end();
  }
}

/**
 * Behind PgBouncer a connection cannot pick its schema (PgBouncer does not pass `options` on),
 * so each test file gets a database of its own, reached through the pooler, with the LISTEN
 * connection going to the server directly.
 */
async function freshPooledDatabase(serverUrl: string, poolerUrl: string): Promise<TestDatabase> {
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = (statement: string) => onServer(serverUrl, statement);
  await admin(`CREATE DATABASE ${name}`);
  const at = (base: string) => {
    const url = new URL(base);
    url.pathname = `/${name}`;
    return url.toString();
  };
  return { url: at(poolerUrl), listenUrl: at(serverUrl), drop: () => admin(`DROP DATABASE ${name} WITH (FORCE)`) };
}
