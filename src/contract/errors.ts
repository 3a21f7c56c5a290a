import { z } from 'zod';

/**
 * The error envelope (spec §2.6, §7) and the stable set of `status.type` values. Clients branch on
 * `type`; the set only grows. Documented in docs/errors.md.
 */
export const ERROR_TYPES = {
  'invalid-request': 400,
  'invalid-json': 400,
  'invalid-template-shape': 400,
  'unknown-template-key': 400,
  'invalid-permission-mode': 400,
  'unsupported-kind': 400,
  'invalid-session-id': 400,
  'conflicting-references': 400,
  'ambiguous-reference': 400,
  'unresolved-embed': 400,
  'embed-cycle': 400,
  'embed-limit': 400,
  'unsupported-version': 400,
  'invalid-messages': 400,
  'invalid-approval': 400,
  'missing-project-id': 400,
  'unauthenticated': 401,
  'forbidden': 403,
  'not-found': 404,
  'unknown-reference': 404,
  'method-not-allowed': 405,
  'not-acceptable': 406,
  'request-timeout': 408,
  'conflict': 409,
  'interaction-not-pending': 409,
  'session-busy': 409,
  'turn-cancelled': 409,
  'payload-too-large': 413,
  'unsupported-media-type': 415,
  'upstream-auth': 424,
  'mcp-unavailable': 424,
  'harness-unavailable': 424,
  'upstream-rate-limited': 429,
  'headers-too-large': 431,
  'not-implemented': 501,
  'upstream-error': 502,
  'upstream-rejected': 502,
  'upstream-unavailable': 503,
  'upstream-timeout': 504,
  'turn-timeout': 504,
  'internal': 500,
  'unavailable': 503,
  'insufficient-storage': 507,
} as const;
export type ErrorType = keyof typeof ERROR_TYPES;

const ErrorStatus = z.object({
  code: z.number().int(),
  message: z.string(),
  type: z.string().optional(),
  stacktrace: z.union([z.string(), z.array(z.string())]).optional(),
});

export const ErrorEnvelope = z.object({
  version: z.string(),
  status: ErrorStatus,
  trace_id: z.string().optional(),
  span_id: z.string().optional(),
  session_id: z.string().optional(),
});
export type ErrorEnvelope = z.infer<typeof ErrorEnvelope>;
