import { sql, type RawBuilder } from 'kysely';

/**
 * Encoding of column values shared by the repositories. JSON lives in text columns and time in
 * ISO-8601 UTC text so SQLite and PostgreSQL store, compare and sort them identically.
 */

export type Engine = 'sqlite' | 'postgres';

/**
 * The database's own clock, `plusMs` ahead, in the same ISO-8601 UTC text as every time column.
 * Leases and claims are written and expire by it, never by a replica's clock: two replicas whose
 * clocks disagree by any amount still agree on who holds a session or a case.
 */
export function dbTime(engine: Engine, plusMs = 0): RawBuilder<string> {
  return dbTimePlus(engine, dbOffset(engine, plusMs));
}

/** `dbTime` with its offset as the value `dbOffset` makes, so a prepared statement can bind it. */
export function dbTimePlus(engine: Engine, offset: number | string): RawBuilder<string> {
  if (engine === 'postgres') {
    return sql<string>`to_char((clock_timestamp() + make_interval(secs => ${offset}::float8)) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
  }
  return sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${offset})`;
}

/** What `dbTimePlus` binds for `ms` from now: seconds for PostgreSQL, a modifier such as `+30 seconds` for SQLite. */
export function dbOffset(engine: Engine, ms: number): number | string {
  return engine === 'postgres' ? ms / 1000 : `${ms >= 0 ? '+' : ''}${ms / 1000} seconds`;
}

export function nowIso(): string {
  return new Date().toISOString();
}

export function toJson(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

export function fromJson<T>(text: string | null): T | null {
  return text === null ? null : (JSON.parse(text) as T);
}

/**
 * `record` with `key` read from a JSON column when first asked for, not when the row is read: a
 * turn's request holds the whole conversation (225 KB at 1,000 messages), and most readers of the
 * row never look at it (BENCHMARKS.md, "JSON columns parsed when read"). The value is parsed once
 * and then kept as a plain property, in the key's place.
 */
export function withLazyJson<T extends object>(record: T, key: keyof T & string, text: string | null): T {
  const settle = (value: unknown) => Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
  return Object.defineProperty(record, key, {
    get: () => {
      const value = fromJson<unknown>(text);
      settle(value);
      return value;
    },
    set: settle,
    enumerable: true,
    configurable: true,
  });
}
