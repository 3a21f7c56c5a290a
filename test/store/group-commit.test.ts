import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.ts';
import { prepare } from '../../src/store/prepared.ts';
import { tempDir } from './helpers.ts';

const dir = await tempDir('group-commit');
let files = 0;

/** A store on a file of its own, and a second connection to that file that sees only what is committed. */
async function storeAndWatcher(): Promise<{ store: Store; committed: (id: string) => boolean; file: string }> {
  const dataDir = path.join(dir, `db-${++files}`);
  const store = await openStore({ dataDir });
  const file = path.join(dataDir, 'agentd.db');
  const watcher = new DatabaseSync(file);
  const find = watcher.prepare('select id from sessions where id = ?');
  await nextIteration();
  return { store, file, committed: (id) => find.all(id).length > 0 };
}

/**
 * Resolves after the check phase callbacks the writes before it queued (their group's commit, the
 * end of "this iteration has written"): setImmediate runs callbacks in the order they were queued.
 * A zero timer is not enough: queued from a check phase it can fire before the next one.
 */
const nextIteration = () => new Promise((resolve) => setImmediate(resolve));

const session = (store: Store, id: string) =>
  store.db.insertInto('sessions').values({ project_id: 'p', id, created_at: 'x', updated_at: 'x' }).execute();

/**
 * SQLite's writes of one event-loop iteration share one commit (src/store/sqlite-driver.ts); each
 * caller is answered once its write is committed.
 */
describe('sqlite group commit', () => {
  it('commits the writes of one iteration together, and answers each only once it is committed', async () => {
    const { store, committed } = await storeAndWatcher();
    const ids = ['a', 'b', 'c', 'd'];
    const seenWhenAnswered = new Map<string, boolean>();
    // Queued before the group's commit, so it runs after the writes and before that commit.
    const beforeCommit = new Promise<boolean[]>((resolve) => setImmediate(() => resolve(ids.map(committed))));
    const writes = ids.map((id) => session(store, id).then(() => seenWhenAnswered.set(id, committed(id))));
    // Every write of the iteration waits for the group's commit, the first one too.
    expect(await beforeCommit).toEqual([false, false, false, false]);
    await Promise.all(writes);
    expect(ids.map(committed)).toEqual([true, true, true, true]);
    expect([...seenWhenAnswered.values()]).toEqual([true, true, true, true]);
    await store.close();
  });

  it('keeps the other writes of a group when one of them fails', async () => {
    const { store, committed } = await storeAndWatcher();
    await session(store, 'taken');
    await nextIteration();
    const results = await Promise.allSettled([session(store, 'first'), session(store, 'second'), session(store, 'taken'), session(store, 'third')]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect(String((results[2] as PromiseRejectedResult).reason)).toMatch(/UNIQUE/);
    expect(['first', 'second', 'third'].map(committed)).toEqual([true, true, true]);
    await store.close();
  });

  it('fails every write of a group whose transaction a statement rolled back, and writes again after', async () => {
    const { store, committed } = await storeAndWatcher();
    await session(store, 'taken');
    await nextIteration();
    const grouped = [session(store, 'grouped'), session(store, 'grouped too')];
    const rollback = store.db.insertInto('sessions').orRollback().values({ project_id: 'p', id: 'taken', created_at: 'x', updated_at: 'x' }).execute();
    const results = await Promise.allSettled([...grouped, rollback]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(String((results[0] as PromiseRejectedResult).reason)).toMatch(/rolled back.*UNIQUE/);
    expect(['grouped', 'grouped too'].map(committed)).toEqual([false, false]);
    await Promise.all([session(store, 'later'), session(store, 'later too')]);
    expect(['later', 'later too'].map(committed)).toEqual([true, true]);
    await store.close();
  });

  it('answers a read made while a group is open with the group, after it commits', async () => {
    const { store, committed } = await storeAndWatcher();
    const writes = [session(store, 'one'), session(store, 'two')];
    const read = store.sessions.get('p', 'two').then((row) => ({ row, committed: committed('two') }));
    await Promise.all(writes);
    expect(await read).toMatchObject({ row: { id: 'two' }, committed: true });
    await store.close();
  });

  it("commits the open group before a caller's own transaction, which rolls back only itself", async () => {
    const { store, committed } = await storeAndWatcher();
    const writes = [session(store, 'before'), session(store, 'grouped')];
    const trx = store.db.transaction().execute(async (t) => {
      await t.insertInto('sessions').values({ project_id: 'p', id: 'inside', created_at: 'x', updated_at: 'x' }).execute();
      throw new Error('rolled back');
    });
    await expect(trx).rejects.toThrow('rolled back');
    await Promise.all(writes);
    expect(['before', 'grouped', 'inside'].map(committed)).toEqual([true, true, false]);
    await store.close();
  });

  it('lets another store of this process write to the same file while a group is open', async () => {
    const { store, file, committed } = await storeAndWatcher();
    const other = await openStore({ dataDir: path.dirname(file) });
    // Queued before the group's commit: the other store writes while the group is open. Had the
    // group kept the file's write lock, that write would wait out the busy timeout and fail.
    const otherWrite = new Promise((resolve, reject) => setImmediate(() => session(other, 'from the other').then(resolve, reject)));
    const writes = [session(store, 'one'), session(store, 'two')];
    await otherWrite;
    await Promise.all(writes);
    expect(['one', 'two', 'from the other'].map(committed)).toEqual([true, true, true]);
    await other.close();
    await store.close();
  });
});

/**
 * Prepared statements (prepared.ts) run past Kysely's executor on SQLite: the same groups and
 * answers, and never inside a caller's own transaction, which only Kysely's lock orders.
 */
describe('sqlite prepared statements', () => {
  const preparedSession = (store: Store) =>
    prepare(store.db, ['id'], ({ id }: { id: string }) => store.db.insertInto('sessions').values({ project_id: 'p', id, created_at: 'x', updated_at: 'x' }));

  it('join the iteration’s group, are answered once it is committed, and fail alone', async () => {
    const { store, committed } = await storeAndWatcher();
    const insert = preparedSession(store);
    await insert({ id: 'taken' });
    const beforeCommit = new Promise<boolean[]>((resolve) => setImmediate(() => resolve(['a', 'b', 'c'].map(committed))));
    const results = await Promise.allSettled([insert({ id: 'a' }).then(() => committed('a')), session(store, 'b'), insert({ id: 'taken' }), insert({ id: 'c' }).then(() => committed('c'))]);
    expect(await beforeCommit).toEqual([false, false, false]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect(String((results[2] as PromiseRejectedResult).reason)).toMatch(/UNIQUE/);
    expect([(results[0] as PromiseFulfilledResult<boolean>).value, (results[3] as PromiseFulfilledResult<boolean>).value]).toEqual([true, true]);
    expect(['a', 'b', 'c'].map(committed)).toEqual([true, true, true]);
    await store.close();
  });

  it("stay out of a caller's own transaction at every moment of it, its BEGIN and its end included", async () => {
    const { store, committed } = await storeAndWatcher();
    const insert = preparedSession(store);
    const trx = store.db
      .transaction()
      .execute(async (t) => {
        await t.insertInto('sessions').values({ project_id: 'p', id: 'inside', created_at: 'x', updated_at: 'x' }).execute();
        await nextIteration();
        throw new Error('rolled back');
      })
      .then(
        () => 'committed',
        (error: Error) => error.message,
      );
    // One write at every turn of the microtask queue, and at the next iterations, while the
    // transaction begins, writes, waits and rolls back: had one run on its connection inside it,
    // the rollback would take it along.
    const writes: Promise<unknown>[] = [];
    for (let tick = 0; tick < 60; tick++) {
      writes.push(insert({ id: `tick ${tick}` }));
      await (tick % 20 === 19 ? nextIteration() : Promise.resolve());
    }
    expect(await trx).toBe('rolled back');
    await Promise.all(writes);
    expect(committed('inside')).toBe(false);
    expect(Array.from({ length: 60 }, (_, tick) => committed(`tick ${tick}`)).every(Boolean)).toBe(true);
    await store.close();
  });

  it('are timed for the metrics as every other statement is', async () => {
    const { store } = await storeAndWatcher();
    const insert = preparedSession(store);
    const timed: number[] = [];
    store.timeQueries((ms) => timed.push(ms));
    await insert({ id: 'timed' });
    expect(timed).toHaveLength(1);
    expect(timed[0]).toBeGreaterThanOrEqual(0);
    await store.close();
  });
});
