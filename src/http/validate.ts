import type { z } from 'zod';
import { describeIssue, jsonPath } from '../contract/zod-errors.ts';
import { AppError } from '../errors.ts';

/** Validates a request part against its contract schema; the 400 names the first wrong path. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, where = ''): z.output<S> {
  const parsed = schema.safeParse(value ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  // A session id is checked the same way on every route, and named the same way when wrong.
  throw new AppError(issue.path.at(-1) === 'session_id' ? 'invalid-session-id' : 'invalid-request', describeIssue(where, issue));
}

/** Far deeper than any real request needs (a tool's JSON Schema nests a dozen levels). */
export const MAX_BODY_DEPTH = 100;

/**
 * Refuses a body nested deeper than MAX_BODY_DEPTH. The JSON parser copes with any depth, but the
 * recursive walks after it (schemas, JSON.stringify when the turn is stored) run out of stack,
 * which would turn bad input into a 500. Iterative, so the check itself cannot overflow.
 */
export function checkBodyDepth(body: unknown): void {
  // Parsed JSON only: an upload's Buffer body is bytes, not nesting.
  const isNode = (value: unknown): value is object =>
    Array.isArray(value) || (typeof value === 'object' && value !== null && [Object.prototype, null].includes(Object.getPrototypeOf(value)));
  const pending: Array<{ value: object; path: PropertyKey[] }> = isNode(body) ? [{ value: body, path: [] }] : [];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { value, path } = next;
    if (path.length >= MAX_BODY_DEPTH) {
      throw new AppError('invalid-request', `the body nests objects and arrays deeper than ${MAX_BODY_DEPTH} levels at ${jsonPath('', path)}`);
    }
    const entries: Array<[PropertyKey, unknown]> = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    for (const [key, child] of entries) if (isNode(child)) pending.push({ value: child, path: [...path, key] });
  }
}
