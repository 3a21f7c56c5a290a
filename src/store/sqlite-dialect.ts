import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import { SqliteDialect, type SqliteDatabase, type SqliteStatement } from 'kysely';

/**
 * Kysely's `SqliteDialect` over Node's built-in `node:sqlite`, so the embedded default needs no
 * native addon. Kysely serialises access to the single connection itself (the SQLite adapter
 * declares no support for multiple connections), so one `DatabaseSync` is shared safely.
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

function bindable(parameters: ReadonlyArray<unknown>): SQLInputValue[] {
  return parameters.map((value, index) => {
    // node:sqlite refuses booleans with an error that names no column; fail with one that says
    // where the fix belongs, since PostgreSQL would take them and the bug would hide there.
    if (typeof value === 'boolean') {
      throw new TypeError(`SQL parameter ${index + 1} is a boolean: repositories store booleans as 0/1`);
    }
    return value as SQLInputValue;
  });
}

function adaptStatement(statement: StatementSync): SqliteStatement {
  return {
    // Anything that yields columns (SELECT, INSERT … RETURNING, most PRAGMAs) must be read with `all`.
    reader: statement.columns().length > 0,
    all: (parameters) => statement.all(...bindable(parameters)),
    run: (parameters) => statement.run(...bindable(parameters)),
    iterate: (parameters) => statement.iterate(...bindable(parameters)),
  };
}

/** Bounds the statement cache; the repositories use a few dozen SQL texts, `IN` lists of varying length add more. */
const STATEMENT_CACHE_SIZE = 256;

/** The subset of better-sqlite3's `Database` that Kysely's SQLite driver calls, backed by `DatabaseSync`. */
export function adaptDatabaseSync(db: DatabaseSync): SqliteDatabase {
  // Kysely asks for a new statement on every query, and compiling the SQL cost as much CPU as
  // running it on a turn's path (see BENCHMARKS.md), so statements are kept per SQL text. Reuse is
  // safe: every call resets the statement, and Kysely runs one query at a time on this connection.
  const statements = new Map<string, SqliteStatement>();
  return {
    prepare: (sql) => {
      let statement = statements.get(sql);
      if (!statement) {
        if (statements.size >= STATEMENT_CACHE_SIZE) statements.delete(statements.keys().next().value!);
        statement = adaptStatement(db.prepare(sql));
        statements.set(sql, statement);
      }
      return statement;
    },
    close: () => {
      if (db.isOpen) db.close();
    },
  };
}

export function createNodeSqliteDialect(db: DatabaseSync): SqliteDialect {
  return new SqliteDialect({ database: adaptDatabaseSync(db) });
}
