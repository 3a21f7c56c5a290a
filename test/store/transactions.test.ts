import path from 'node:path';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.ts';
import { tempDir } from './helpers.ts';

const dir = await tempDir('transactions');

/** Kysely transactions on the node:sqlite dialect: begin, commit and rollback on the one connection. */
describe('sqlite transactions', () => {
  it('commits every statement of a transaction that returns', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const result = await store.db.transaction().execute(async (trx) => {
      await trx.insertInto('sessions').values({ project_id: 'p', id: 'a', created_at: 'x', updated_at: 'x' }).execute();
      await trx.insertInto('sessions').values({ project_id: 'p', id: 'b', created_at: 'x', updated_at: 'x' }).execute();
      return 'done';
    });
    expect(result).toBe('done');
    expect(await store.sessions.get('p', 'a')).toBeDefined();
    expect(await store.sessions.get('p', 'b')).toBeDefined();
    await store.close();
  });

  it('rolls back every statement of a transaction that throws, and the connection stays usable', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    await expect(
      store.db.transaction().execute(async (trx) => {
        await trx.insertInto('sessions').values({ project_id: 'p', id: 'a', created_at: 'x', updated_at: 'x' }).execute();
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await store.sessions.get('p', 'a')).toBeUndefined();
    // A failing statement inside rolls back the ones before it as well.
    await expect(
      store.db.transaction().execute(async (trx) => {
        await trx.insertInto('sessions').values({ project_id: 'p', id: 'c', created_at: 'x', updated_at: 'x' }).execute();
        await trx.insertInto('sessions').values({ project_id: 'p', id: 'c', created_at: 'x', updated_at: 'x' }).execute();
      }),
    ).rejects.toThrow(/UNIQUE/);
    expect(await store.sessions.get('p', 'c')).toBeUndefined();
    // Not left inside a dangling transaction: a later transaction can begin and commit.
    await store.db.transaction().execute((trx) => trx.insertInto('sessions').values({ project_id: 'p', id: 'd', created_at: 'x', updated_at: 'x' }).execute());
    expect(await store.sessions.get('p', 'd')).toBeDefined();
    await store.close();
  });

  it('keeps queries from outside the transaction off its connection until it ends', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let inserted!: () => void;
    const didInsert = new Promise<void>((resolve) => (inserted = resolve));
    const trx = store.db.transaction().execute(async (t) => {
      await t.insertInto('sessions').values({ project_id: 'p', id: 'a', created_at: 'x', updated_at: 'x' }).execute();
      inserted();
      await gate;
      throw new Error('rolled back');
    });
    await didInsert;
    // Issued mid-transaction; had it run on the shared connection now, it would see the uncommitted row.
    const outside = store.sessions.get('p', 'a');
    release();
    await expect(trx).rejects.toThrow('rolled back');
    expect(await outside).toBeUndefined();
    await store.close();
  });

  it('is invisible to another connection on the same file until it commits', async () => {
    const dataDir = path.join(dir, 'shared');
    const one = await openStore({ dataDir });
    const two = await openStore({ dataDir });
    await one.db.transaction().execute(async (trx) => {
      await trx.insertInto('sessions').values({ project_id: 'p', id: 'a', created_at: 'x', updated_at: 'x' }).execute();
      expect(await two.sessions.get('p', 'a')).toBeUndefined();
    });
    expect(await two.sessions.get('p', 'a')).toBeDefined();
    const count = await sql<{ n: number }>`select count(*) as n from sessions`.execute(two.db);
    expect(count.rows[0]?.n).toBe(1);
    await one.close();
    await two.close();
  });
});
