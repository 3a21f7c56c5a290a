import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  type KyselyPlugin,
  type QueryId,
  type QueryResult,
  type RootOperationNode,
} from 'kysely';
import { makeRoom } from '../bounded.ts';

/**
 * Kysely's driver for Node's built-in `node:sqlite`, with group commit.
 *
 * Every write outside a caller's own transaction used to be a transaction of its own, and its
 * commit (writing the changed pages to the WAL, taking and dropping the file's locks) cost more CPU
 * than the statement: a turn's five statements took about 300 µs as five commits and 100–140 µs
 * with fifty turns' statements to a commit (raw `node:sqlite`, BENCHMARKS.md). So the writes of one
 * event-loop iteration share one transaction, which the iteration's check phase commits. A write
 * alone in its iteration is a group of one: committing it at once instead, as this driver first
 * did, cost a commit per iteration more under load for nothing one at a time (`bench:store`, 50
 * at a time 79–99 → 50–73 µs per turn; 1 at a time unchanged). Each statement's
 * caller is answered only after its commit, so a write the caller was told of is as durable as
 * before. Under load many turns' writes share a commit, and the pages they touch in common (the
 * leases, the end of the turns table) are written once.
 *
 * A statement that fails is undone by SQLite alone, and the others of its group stand; an error
 * that ends the whole transaction (a full disk, an I/O error) fails every statement of the group.
 * Reads outside a group run at once; a read while a group is open sees its writes, so it is
 * answered with them. A caller's own transaction first commits the open group.
 */

/** Statements that change rows, and so may share a group. Anything else not a SELECT (DDL, PRAGMA, raw SQL) runs alone. */
const WRITES = new Set<RootOperationNode['kind']>(['InsertQueryNode', 'UpdateQueryNode', 'DeleteQueryNode']);

/** Bounds the statement cache; the repositories use a few dozen SQL texts, `IN` lists of varying length add more. */
const STATEMENT_CACHE_SIZE = 256;

/** One group of writes and the commit every one of them waits for. */
class Group {
  readonly committed: Promise<void>;
  resolve!: () => void;
  reject!: (error: Error) => void;

  constructor() {
    this.committed = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // Every statement of the group awaits this; a group whose callers are gone must not crash the process.
    this.committed.catch(() => undefined);
  }
}

/** Connections by database file, so one that is about to write can first commit another's group on the same file (tests open two). */
const onFile = new Map<string, Set<NodeSqliteConnection>>();

class NodeSqliteConnection implements DatabaseConnection {
  readonly #db: DatabaseSync;
  readonly #location: string;
  // Kysely asks for a new statement on every query, and compiling the SQL cost as much CPU as
  // running it on a turn's path (BENCHMARKS.md), so statements are kept per SQL text. Reuse is
  // safe: every call resets the statement and runs it to its end before returning, whether it
  // came through Kysely or `runNow`.
  readonly #statements = new Map<string, { statement: StatementSync; reader: boolean }>();
  /** Queries whose answer waits for their group's commit, read by the plugin `nodeSqliteDriver` makes. */
  readonly waiting = new WeakMap<QueryId, Group>();
  #group: Group | undefined;
  readonly #begin: StatementSync;
  readonly #commit: StatementSync;
  /** A caller's own transaction is open: its statements run as it orders them. */
  inTransaction = false;

  constructor(db: DatabaseSync, location: string) {
    this.#db = db;
    this.#location = location;
    this.#begin = db.prepare('BEGIN IMMEDIATE');
    this.#commit = db.prepare('COMMIT');
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const { result, group } = this.#execute<R>(compiled);
    if (group) this.waiting.set(compiled.queryId, group);
    return result;
  }

  /**
   * Runs a statement now, without Kysely's executor, and answers once its group has committed:
   * undefined while a caller's own transaction holds the connection, where only Kysely's lock
   * keeps other statements out of it. (Its check also covers the moment between that
   * transaction's BEGIN and the flag its driver call sets after it.)
   */
  runNow<R>(compiled: CompiledQuery): Promise<QueryResult<R>> | undefined {
    if (this.inTransaction || (this.#db.isTransaction && !this.#group)) return undefined;
    try {
      const { result, group } = this.#execute<R>(compiled);
      return group ? group.committed.then(() => result) : Promise.resolve(result);
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  #execute<R>(compiled: CompiledQuery): { result: QueryResult<R>; group?: Group } {
    if (this.inTransaction) return { result: this.#run(compiled) };
    const kind = compiled.query.kind;
    if (kind === 'SelectQueryNode') {
      if (!this.#group) return { result: this.#run(compiled) };
    } else if (!WRITES.has(kind)) {
      this.commitGroup();
      this.commitOthers();
      return { result: this.#run(compiled) };
    }
    const group = this.#group ?? this.#open();
    try {
      return { result: this.#run(compiled), group };
    } catch (error) {
      // SQLite undoes a failed statement alone, unless the error ended the whole transaction.
      if (!this.#db.isTransaction) this.#lose(group, error as Error);
      throw error;
    }
  }

  async *streamQuery<R>(compiled: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    this.commitGroup();
    for (const row of this.#prepared(compiled.sql).statement.iterate(...bindable(compiled.parameters))) yield { rows: [row as R] };
  }

  /** Commits the open group now; its statements' callers are answered. */
  commitGroup(): void {
    const group = this.#group;
    if (!group) return;
    this.#group = undefined;
    try {
      this.#commit.run();
      group.resolve();
    } catch (error) {
      try {
        if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      } catch {
        // The failed commit is what the callers are told of; this runs from the event loop, where a throw would end the process.
      }
      group.reject(new Error(`the writes grouped with this one could not be committed: ${(error as Error).message}`, { cause: error }));
    }
  }

  /** Before this connection writes: another connection's open group on the same file holds the write lock. */
  commitOthers(): void {
    for (const other of onFile.get(this.#location) ?? []) if (other !== this) other.commitGroup();
  }

  attach(): void {
    if (this.#location === ':memory:') return;
    const set = onFile.get(this.#location) ?? new Set();
    set.add(this);
    onFile.set(this.#location, set);
  }

  detach(): void {
    this.commitGroup();
    const set = onFile.get(this.#location);
    set?.delete(this);
    if (set?.size === 0) onFile.delete(this.#location);
  }

  #open(): Group {
    this.commitOthers();
    this.#begin.run();
    const group = new Group();
    this.#group = group;
    setImmediate(() => this.#group === group && this.commitGroup());
    return group;
  }

  #lose(group: Group, error: Error): void {
    this.#group = undefined;
    group.reject(new Error(`the writes grouped with this one were rolled back: ${error.message}`, { cause: error }));
  }

  #prepared(sql: string): { statement: StatementSync; reader: boolean } {
    let entry = this.#statements.get(sql);
    if (!entry) {
      makeRoom(this.#statements, STATEMENT_CACHE_SIZE);
      const statement = this.#db.prepare(sql);
      // Anything that yields columns (SELECT, INSERT … RETURNING, most PRAGMAs) must be read with `all`.
      entry = { statement, reader: statement.columns().length > 0 };
      this.#statements.set(sql, entry);
    }
    return entry;
  }

  #run<R>(compiled: CompiledQuery): QueryResult<R> {
    const { statement, reader } = this.#prepared(compiled.sql);
    const parameters = bindable(compiled.parameters);
    if (reader) return { rows: statement.all(...parameters) as R[] };
    const { changes, lastInsertRowid } = statement.run(...parameters);
    return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
  }
}

function bindable(parameters: ReadonlyArray<unknown>): SQLInputValue[] {
  const values = new Array<SQLInputValue>(parameters.length);
  for (let index = 0; index < parameters.length; index++) {
    const value = parameters[index];
    // node:sqlite refuses booleans with an error that names no column; fail with one that says
    // where the fix belongs, since PostgreSQL would take them and the bug would hide there.
    if (typeof value === 'boolean') throw new TypeError(`SQL parameter ${index + 1} is a boolean: repositories store booleans as 0/1`);
    values[index] = value as SQLInputValue;
  }
  return values;
}

/** Runs a compiled statement past Kysely's executor, or says (undefined) that it must go through it. */
export type DirectRun = <R>(compiled: CompiledQuery) => Promise<QueryResult<R>> | undefined;

/**
 * The driver and the plugin that holds each grouped statement's answer until its group commits
 * (a plugin's result hook runs after Kysely has released the connection, so the next statement
 * can join the group meanwhile). Both go to the same `Kysely`; `runNow` is for the statements
 * `prepare` (prepared.ts) makes of it.
 */
export function nodeSqliteDriver(db: DatabaseSync, location: string): { driver: Driver; plugin: KyselyPlugin; runNow: DirectRun } {
  const connection = new NodeSqliteConnection(db, location);
  const run = (sql: string) => connection.executeQuery(CompiledQuery.raw(sql));
  const driver: Driver = {
    init: async () => connection.attach(),
    acquireConnection: async () => connection,
    // `begin` is raw SQL, which commits the open group first (executeQuery).
    beginTransaction: async () => {
      await run('begin');
      connection.inTransaction = true;
    },
    commitTransaction: async () => {
      try {
        await run('commit');
      } finally {
        connection.inTransaction = db.isTransaction;
      }
    },
    rollbackTransaction: async () => {
      try {
        await run('rollback');
      } finally {
        connection.inTransaction = false;
      }
    },
    releaseConnection: async () => {},
    destroy: async () => {
      connection.detach();
      if (db.isOpen) db.close();
    },
  };
  const plugin: KyselyPlugin = {
    transformQuery: ({ node }) => node,
    transformResult: async ({ queryId, result }) => {
      const group = connection.waiting.get(queryId);
      if (group) {
        connection.waiting.delete(queryId);
        await group.committed;
      }
      return result;
    },
  };
  return { driver, plugin, runNow: (compiled) => connection.runNow(compiled) };
}
