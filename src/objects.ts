/** Small helpers for the JSON-shaped values the service reads and writes. */

/** A plain JSON object: not null, not an array. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** `{key: value}`, or nothing for a null column: replies leave out what would be null. */
export function optional<K extends string, V>(key: K, value: V | null): { [P in K]?: V } {
  return value === null ? {} : ({ [key]: value } as { [P in K]?: V });
}
