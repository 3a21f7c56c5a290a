import type { z } from 'zod';
import { describeIssue } from '../contract/zod-errors.ts';
import { AppError } from '../errors.ts';

/** Validates a request part against its contract schema; the 400 names the first wrong path. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, where = ''): z.output<S> {
  const parsed = schema.safeParse(value ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  // A session id is checked the same way on every route, and named the same way when wrong.
  throw new AppError(issue.path.at(-1) === 'session_id' ? 'invalid-session-id' : 'invalid-request', describeIssue(where, issue));
}
