import { CONTRACT_VERSION } from '../contract/invoke.ts';
import type { ErrorEnvelope } from '../contract/errors.ts';
import type { AppError } from '../errors.ts';
import type { Redactor } from '../telemetry/redact.ts';

/**
 * Longest message an error body carries. Messages quote what was wrong, and what was sent may be
 * megabytes (a 2 MB `version`); the middle goes, so the start and the place it names (at the end)
 * stay.
 */
const MAX_MESSAGE = 2_000;

function bounded(message: string): string {
  if (message.length <= MAX_MESSAGE) return message;
  const cut = message.length - MAX_MESSAGE;
  return `${message.slice(0, MAX_MESSAGE - 300)} … [${cut} characters left out] … ${message.slice(message.length - 300)}`;
}

/**
 * The error body (spec §2.6): `status.code` equals the HTTP status and nulls are left out.
 * `redact` masks the secret values the request carried, which a message quoting the request
 * would otherwise echo.
 */
export function errorEnvelope(
  error: AppError,
  run: { sessionId?: string | undefined; traceId?: string | undefined; spanId?: string | undefined },
  debug: boolean,
  redact: Redactor = (value) => value,
): ErrorEnvelope {
  const body: ErrorEnvelope = { version: CONTRACT_VERSION, status: { code: error.status, message: bounded(redact(error.message)), type: error.type } };
  const stack = error.cause instanceof Error ? error.cause.stack : error.stack;
  // The stack's first line is the message as thrown, before `redact`: it goes through it too.
  if (debug && stack) body.status.stacktrace = redact(stack).split('\n');
  if (run.traceId) body.trace_id = run.traceId;
  if (run.spanId) body.span_id = run.spanId;
  if (run.sessionId) body.session_id = run.sessionId;
  return body;
}
