import type { z } from 'zod';
import { safeParseNullsAbsent } from '../contract/optional-nulls.ts';
import { describeIssue } from '../contract/zod-errors.ts';
import { AppError } from '../errors.ts';

/**
 * Inbound messages are checked part by part; every rejection names the JSON path of the value. A
 * `null` for an optional field is the field left out, as clients that serialise every field send it.
 */
export function parseAt<T extends z.ZodType>(schema: T, value: unknown, at: string): z.output<T> {
  const parsed = safeParseNullsAbsent(schema, value);
  if (!parsed.success) throw new AppError('invalid-messages', describeIssue(at, parsed.error.issues[0]!));
  return parsed.data;
}

export function invalidAt(what: string, at: string): never {
  throw new AppError('invalid-messages', `${what} at ${at}`);
}
