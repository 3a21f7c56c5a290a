import { CONTRACT_VERSION } from '../contract/invoke.ts';
import type { ErrorEnvelope } from '../contract/errors.ts';
import type { AppError } from '../errors.ts';

/** The error body (spec §2.6): `status.code` equals the HTTP status and nulls are left out. */
export function errorEnvelope(error: AppError, run: { sessionId?: string | undefined; traceId?: string | undefined; spanId?: string | undefined }, debug: boolean): ErrorEnvelope {
  const body: ErrorEnvelope = { version: CONTRACT_VERSION, status: { code: error.status, message: error.message, type: error.type } };
  const stack = error.cause instanceof Error ? error.cause.stack : error.stack;
  if (debug && stack) body.status.stacktrace = stack.split('\n');
  if (run.traceId) body.trace_id = run.traceId;
  if (run.spanId) body.span_id = run.spanId;
  if (run.sessionId) body.session_id = run.sessionId;
  return body;
}
