import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.ts';
import { freshDatabase, TEST_POSTGRES_URL, type TestDatabase } from '../support/database.ts';
import { tempDir } from './helpers.ts';

/** Another client's schema on the same server, made and dropped by that client. */
async function otherSchema(admin: pg.Client): Promise<{ name: string; drop(): Promise<unknown> }> {
  const name = `other_${randomBytes(6).toString('hex')}`;
  await admin.query(`CREATE SCHEMA ${name}; CREATE TABLE ${name}.things (id serial primary key, note text)`);
  return { name, drop: () => admin.query(`DROP SCHEMA ${name} CASCADE`) };
}

describe.runIf(TEST_POSTGRES_URL)('a store on a PostgreSQL server others use too', () => {
  const admin = new pg.Client({ connectionString: TEST_POSTGRES_URL });
  beforeAll(() => admin.connect());
  afterAll(() => admin.end());

  it('looks only at its own schema: another client\'s tables are not listed', async () => {
    const other = await otherSchema(admin);
    const database = await freshDatabase();
    const store = await openStore({ dataDir: await tempDir('own-schema'), databaseUrl: database.url });
    try {
      const tables = await store.db.introspection.getTables({ withInternalKyselyTables: true });
      const schema = (await sql<{ schema: string }>`select current_schema() as schema`.execute(store.db)).rows[0]!.schema;
      expect(new Set(tables.map((t) => t.schema))).toEqual(new Set([schema]));
      expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(['turns', 'sessions', 'kysely_migration']));
      expect(tables.find((t) => t.name === 'turns')?.columns.map((c) => c.name)).toEqual(expect.arrayContaining(['id', 'session_id', 'status']));
    } finally {
      await store.close();
      await database.drop();
      await other.drop();
    }
  });

  it('opens and migrates while other clients create and drop schemas of their own', async () => {
    const churner = new pg.Client({ connectionString: TEST_POSTGRES_URL });
    await churner.connect();
    let churning = true;
    const churn = (async () => {
      while (churning) await (await otherSchema(churner)).drop();
    })();
    const opened: TestDatabase[] = [];
    try {
      for (let i = 0; i < 8; i++) {
        const database = await freshDatabase();
        opened.push(database);
        const store = await openStore({ dataDir: await tempDir('own-schema'), databaseUrl: database.url });
        await store.close();
      }
    } finally {
      churning = false;
      await churn;
      await churner.end();
      await Promise.all(opened.map((d) => d.drop()));
    }
  });
});
