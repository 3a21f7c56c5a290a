import { DatabaseSync } from 'node:sqlite';
import { SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler, type Dialect, type KyselyPlugin } from 'kysely';
import { workerThread } from '../worker-thread.ts';
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
 * The largest the WAL grows, in bytes. The worker's checkpoints never wait for the server's writes,
 * so under a load that commits without a pause they never copy the last frames, the WAL never
 * starts over, and it grows without bound: 2 GB in 90 s at 2,200 turns a second, with every read
 * looking through it (BENCHMARKS.md, "The WAL under a load that never pauses"). Past this size the
 * server's own connection checkpoints right after its commit, when no write can come in between,
 * so that its next transaction starts the WAL over, and the file is cut back to this size.
 */
const WAL_CEILING_BYTES = 64 * 1024 * 1024;

/**
 * Moves WAL checkpoints off the event loop: a worker thread does them every `intervalMs`, and the
 * server's connection only past `walCeilingBytes` (above). Returns the function that stops the
 * worker (after a last checkpoint). A `:memory:` database has no WAL and gets no worker.
 */
export function checkpointInBackground(db: DatabaseSync, location: string, { intervalMs = 500, walCeilingBytes = WAL_CEILING_BYTES } = {}): () => Promise<void> {
  if (location === ':memory:') return async () => {};
  const { page_size: pageSize } = db.prepare('PRAGMA page_size').get() as { page_size: number };
  db.exec(`PRAGMA wal_autocheckpoint = ${Math.max(1, Math.floor(walCeilingBytes / pageSize))}`);
  db.exec(`PRAGMA journal_size_limit = ${walCeilingBytes}`);
  const worker = workerThread(new URL('./checkpoint-worker.ts', import.meta.url), { workerData: { location, intervalMs, ceilingBytes: walCeilingBytes } });
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
