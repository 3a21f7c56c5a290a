/**
 * Encoding of column values shared by the repositories. JSON lives in text columns and time in
 * ISO-8601 UTC text so SQLite and PostgreSQL store, compare and sort them identically.
 */

export function nowIso(): string {
  return new Date().toISOString();
}

export function toJson(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

export function fromJson<T>(text: string | null): T | null {
  return text === null ? null : (JSON.parse(text) as T);
}
