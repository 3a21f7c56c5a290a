import type { z } from 'zod';
import { safeParseNullsAbsent } from '../contract/optional-nulls.ts';
import { describeIssue, jsonPath } from '../contract/zod-errors.ts';
import { AppError } from '../errors.ts';

/**
 * Validates a request part against its contract schema; the 400 names the first wrong path. A
 * `null` given for an optional field means the field is absent, on every route.
 */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, where = ''): z.output<S> {
  const parsed = safeParseNullsAbsent(schema, value ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  // A session id is checked the same way on every route, and named the same way when wrong.
  throw new AppError(issue.path.at(-1) === 'session_id' ? 'invalid-session-id' : 'invalid-request', describeIssue(where, issue));
}

/** Far deeper than any real request needs (a tool's JSON Schema nests a dozen levels). */
const MAX_BODY_DEPTH = 100;

/** A node of the walk below: its depth, and the way back to the root for the error's path. */
interface Frame {
  value: object;
  depth: number;
  key?: PropertyKey;
  parent?: Frame;
}

/** Parsed JSON only: an upload's Buffer body is bytes, not nesting. */
const isJsonNode = (value: unknown): value is object =>
  Array.isArray(value) || (typeof value === 'object' && value !== null && [Object.prototype, null].includes(Object.getPrototypeOf(value)));

/**
 * Refuses a body nested deeper than MAX_BODY_DEPTH. The JSON parser copes with any depth, but the
 * recursive walks after it (schemas, JSON.stringify when the turn is stored) run out of stack,
 * which would turn bad input into a 500. Iterative, so the check itself cannot overflow; every
 * request passes through it, so the path is only spelled out for the error.
 */
export function checkBodyDepth(body: unknown): void {
  const pending: Frame[] = isJsonNode(body) ? [{ value: body, depth: 0 }] : [];
  for (let frame = pending.pop(); frame; frame = pending.pop()) {
    if (frame.depth >= MAX_BODY_DEPTH) {
      const path: PropertyKey[] = [];
      for (let at: Frame | undefined = frame; at?.parent; at = at.parent) path.unshift(at.key!);
      throw new AppError('invalid-request', `the body nests objects and arrays deeper than ${MAX_BODY_DEPTH} levels at ${jsonPath('', path)}`);
    }
    const { value } = frame;
    if (Array.isArray(value)) {
      value.forEach((child, key) => isJsonNode(child) && pending.push({ value: child, depth: frame.depth + 1, key, parent: frame }));
    } else {
      for (const key in value) {
        const child = (value as Record<string, unknown>)[key];
        if (isJsonNode(child)) pending.push({ value: child, depth: frame.depth + 1, key, parent: frame });
      }
    }
  }
}

/**
 * Why a JSON body was refused, said precisely. Fastify's parser answers every failure alike ("not
 * valid JSON"), including a body that is valid JSON with a `__proto__` key (or `constructor` with
 * `prototype`), which it refuses because a merge could turn such a key into a changed prototype.
 * Run on the error path only: the body is parsed again to tell which it was and where.
 */
export function jsonBodyError(text: string): AppError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return new AppError('invalid-json', `the body is not valid JSON: ${(error as Error).message}`);
  }
  const pending: Array<{ value: unknown; path: PropertyKey[] }> = [{ value: parsed, path: [] }];
  for (let node = pending.pop(); node; node = pending.pop()) {
    const { value, path } = node;
    if (typeof value !== 'object' || value === null) continue;
    for (const [key, child] of Object.entries(value)) {
      const at = [...path, Array.isArray(value) ? Number(key) : key];
      if (key === '__proto__' || (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype'))) {
        return new AppError('invalid-request', `the body has a "${key}" key at ${jsonPath('', at)}, which could change what objects inherit; agentd refuses it, so rename the key`);
      }
      pending.push({ value: child, path: at });
    }
  }
  return new AppError('invalid-json', 'the body is not valid JSON');
}
