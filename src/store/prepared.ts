import type { CompiledQuery, Compilable, Kysely, QueryResult } from 'kysely';
import type { DirectRun } from './sqlite-driver.ts';

/**
 * Where a database's driver can run a statement itself, the `Kysely` it serves is registered here
 * with that runner (SQLite, `openSqlite` in db.ts). Kysely's executor takes a lock, a connection
 * and a log entry for each statement, several promises each, which cost about 4–6 µs of the 7–10
 * a prepared insert took (BENCHMARKS.md, "Prepared statements past Kysely's executor").
 */
const direct = new WeakMap<Kysely<any>, DirectRun>();

export function runPreparedDirectly(db: Kysely<any>, run: DirectRun): void {
  direct.set(db, run);
}

/**
 * A statement of every turn's path, built and compiled by Kysely once and then run with new values.
 * Kysely builds and compiles each query afresh, and for the turn's five statements that was about
 * as much of the server thread's CPU as the database running them (BENCHMARKS.md). The query is
 * built once with a placeholder for each named value; each run sends the same SQL with the values
 * put where their placeholders went. Values given to `build` as constants stay constant.
 */
export function prepare<V extends Record<string, unknown>, R>(
  db: Kysely<any>,
  names: readonly (keyof V & string)[],
  build: (values: V) => Compilable<R>,
): (values: V) => Promise<QueryResult<R>> {
  const placeholders = Object.fromEntries(names.map((name) => [name, `\u0000agentd:${name}\u0000`]));
  const byPlaceholder = new Map(names.map((name) => [placeholders[name], name]));
  const { sql, query, parameters } = build(placeholders as V).compile();
  const slots = parameters.map((value) => ({ name: typeof value === 'string' ? byPlaceholder.get(value) : undefined, value }));
  // A placeholder that became SQL text, or never reached the statement, would run with the wrong
  // value on every call: refused when the statement is made, not found in the data later.
  for (const name of names) {
    if (sql.includes(placeholders[name]!) || !slots.some((slot) => slot.name === name)) {
      throw new Error(`prepared statement: "${name}" must be a bound value of the statement (${sql})`);
    }
  }
  const runNow = direct.get(db);
  return (values) => {
    const compiled: CompiledQuery = { sql, query, queryId: { queryId: '' }, parameters: slots.map((slot) => (slot.name === undefined ? slot.value : values[slot.name])) };
    return runNow?.<R>(compiled) ?? db.executeQuery<R>(compiled);
  };
}
