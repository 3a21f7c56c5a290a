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
  if (engine === 'postgres') {
    return sql<string>`to_char((clock_timestamp() + make_interval(secs => ${plusMs / 1000}::float8)) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
  }
  return sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${`${plusMs >= 0 ? '+' : ''}${plusMs / 1000} seconds`})`;
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
