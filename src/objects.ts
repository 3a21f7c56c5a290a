/** Small helpers for the JSON-shaped values the service reads and writes. */

/** A plain JSON object: not null, not an array. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** `{key: value}`, or nothing for a null column: replies leave out what would be null. */
export function optional<K extends string, V>(key: K, value: V | null): { [P in K]?: V } {
  return value === null ? {} : ({ [key]: value } as { [P in K]?: V });
}

/**
 * A filter given in the singular (one value or a list) and, as the reference also names it, the
 * plural: every value of both, or undefined when neither was given.
 */
export function allOf<T>(one: T | T[] | undefined, many: T[] | undefined): T[] | undefined {
  return one === undefined && many === undefined ? undefined : [...(one === undefined ? [] : [one].flat() as T[]), ...(many ?? [])];
}

/**
 * `object[key]` for a key the caller chose, read only from the object's own properties: a key
 * such as `constructor` or `__proto__` must find nothing, not what every object inherits.
 */
export function own<V>(object: Readonly<Record<string, V>>, key: string): V | undefined {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}
