import { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import { SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler, type Dialect, type KyselyPlugin } from 'kysely';
import { nodeSqliteDriver, type DirectRun } from './sqlite-driver.ts';

/**
 * SQLite through Node's built-in `node:sqlite`, so the embedded default needs no native addon.
 * Kysely serialises access to the single connection itself (the SQLite adapter declares no
 * support for multiple connections), so one `DatabaseSync` is shared safely.
 */

/** Opens (creating if needed) a database file, or `:memory:`, with the settings the service relies on. */
export function openSqliteDatabase(location: string): DatabaseSync {
  const db = new DatabaseSync(location);
  try {
    // WAL lets readers (e.g. `agentd keys` from another process) work while the server writes;
    // NORMAL is durable in WAL mode except for the last commits on power loss, which is the usual trade.
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = NORMAL');
    db.exec('PRAGMA foreign_keys = ON');
    db.exec('PRAGMA busy_timeout = 5000');
    // Pages are read through a memory map instead of SQLite's own 2 MB page cache: once the file
    // outgrew that cache (about 25,000 turns), each turn's inserts read index pages with a system
    // call apiece and the store's CPU per turn nearly doubled (BENCHMARKS.md). The map reserves
    // address space only; the pages stay in the OS cache.
    db.exec('PRAGMA mmap_size = 268435456');
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/**
 * Moves WAL checkpoints off the event loop: the server's connection stops checkpointing and a
 * worker thread does it every `intervalMs`. Returns the function that stops the worker (after a
 * last checkpoint). A `:memory:` database has no WAL and gets no worker.
 */
export function checkpointInBackground(db: DatabaseSync, location: string, intervalMs = 500): () => Promise<void> {
  if (location === ':memory:') return async () => {};
  db.exec('PRAGMA wal_autocheckpoint = 0');
  const worker = new Worker(new URL('./checkpoint-worker.ts', import.meta.url), { workerData: { location, intervalMs } });
  worker.unref();
  return async () => {
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    // Unref'd so a running server never waits for it; while stopping, the process must.
    worker.ref();
    worker.postMessage('stop');
    await exited;
  };
}

/** Kysely's SQLite dialect on `node:sqlite` through agentd's own driver, and that driver's plugin and direct runner, for one `Kysely`. */
export function createNodeSqliteDialect(db: DatabaseSync, location: string): { dialect: Dialect; plugin: KyselyPlugin; runNow: DirectRun } {
  const { driver, plugin, runNow } = nodeSqliteDriver(db, location);
  const dialect: Dialect = {
    createAdapter: () => new SqliteAdapter(),
    createDriver: () => driver,
    createQueryCompiler: () => new SqliteQueryCompiler(),
    createIntrospector: (kysely) => new SqliteIntrospector(kysely),
  };
  return { dialect, plugin, runNow };
}
