import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.ts';
import { prepare } from '../../src/store/prepared.ts';
import { freshDatabase, type TestDatabase } from '../support/database.ts';
import { tempDir } from './helpers.ts';

let database: TestDatabase;
let store: Store;
beforeAll(async () => {
  database = await freshDatabase();
  store = await openStore({ dataDir: await tempDir('prepared'), databaseUrl: database.url });
});
afterAll(async () => {
  await store.close();
  await database.drop();
});

describe('prepared statements', () => {
  it('binds each run its own values, where the placeholders went, and keeps the constants', async () => {
    const insert = prepare(store.db, ['id', 'at'], ({ id, at }: { id: string; at: string }) =>
      store.db.insertInto('sessions').values({ project_id: 'fixed', id, created_at: at, updated_at: at }).returningAll(),
    );
    expect((await insert({ id: 'one', at: '2026-01-01' })).rows).toEqual([{ project_id: 'fixed', id: 'one', created_at: '2026-01-01', updated_at: '2026-01-01' }]);
    expect((await insert({ id: 'two', at: '2026-02-02' })).rows).toEqual([{ project_id: 'fixed', id: 'two', created_at: '2026-02-02', updated_at: '2026-02-02' }]);
    const drop = prepare(store.db, ['id'], ({ id }: { id: string }) => store.db.deleteFrom('sessions').where('project_id', '=', 'fixed').where('id', '=', id));
    expect(Number((await drop({ id: 'one' })).numAffectedRows)).toBe(1);
    expect(Number((await drop({ id: 'one' })).numAffectedRows)).toBe(0);
    expect(await store.sessions.get('fixed', 'two')).toMatchObject({ id: 'two' });
  });

  it('refuses a value the statement does not bind', () => {
    expect(() => prepare(store.db, ['id', 'unused'], ({ id }: { id: string; unused: string }) => store.db.deleteFrom('sessions').where('id', '=', id))).toThrow(
      /"unused" must be a bound value/,
    );
    expect(() => prepare(store.db, ['id'], ({ id }: { id: string }) => store.db.deleteFrom('sessions').where('id', '=', sql.lit(id)))).toThrow(
      /"id" must be a bound value/,
    );
  });
});
