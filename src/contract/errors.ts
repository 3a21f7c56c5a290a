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

/**
 * What each type means, in a line: docs/errors.md's "when", cut short. /openapi.json describes a
 * route's error statuses with these (src/http/route-errors.ts).
 */
export const ERROR_MEANINGS: Record<ErrorType, string> = {
  'invalid-request': 'A field, query parameter or header has the wrong type or value (the message names its path), or the request is not valid HTTP',
  'invalid-json': 'The body is not JSON, or is empty',
  'invalid-template-shape': 'The template uses the pre-migration flat layout',
  'unknown-template-key': 'A key the template does not define',
  'invalid-permission-mode': 'runner.permissions.default is not allow, ask, allow_reads or deny',
  'unsupported-kind': 'harness.kind, runner.kind or sandbox.kind is not one this server runs',
  'invalid-session-id': 'A session id (body, header or path) does not match ^[A-Za-z0-9._:-]{1,128}$',
  'conflicting-references': 'references populate more than one workflow family, or name things that do not go together',
  'ambiguous-reference': 'A variant slug that several workflows have, with no workflow reference to choose',
  'unresolved-embed': 'The configuration holds an @ag.embed and the request did not ask to resolve it',
  'embed-cycle': 'An @ag.embed leads back to a revision it is part of',
  'embed-limit': 'Embeds nest deeper than 10 levels, number over 100 in one configuration, or bring in over 10 MiB',
  'unsupported-version': 'version is not a supported contract version',
  'invalid-messages': 'The conversation is missing or malformed',
  'invalid-approval': 'An in-band decision names an approval this session never paused on, or a paused call was re-posted without one',
  'missing-project-id': 'The project_id query parameter is missing',
  'unauthenticated': 'No Authorization: ApiKey <key> header, or the key is unknown or revoked',
  'forbidden': 'The key belongs to another project, or its role may not do this',
  'not-found': 'What the path (or the request) names does not exist in this project',
  'unknown-reference': "references (or an @ag.embed's) name a workflow, variant, revision, environment or deployment this project does not have",
  'method-not-allowed': 'The path is a route, but not for this method',
  'not-acceptable': 'Accept rules out what the request produces, or names no supported type',
  'request-timeout': 'The request (headers, or the whole body) did not arrive in time',
  'conflict': 'The resource already exists, or its state does not allow this',
  'session-busy': 'The session already runs a turn (or is being deleted)',
  'turn-cancelled': 'The turn was taken over by a newer turn on its session, or stopped',
  'interaction-not-pending': 'The interaction is no longer pending (answered or cancelled already)',
  'payload-too-large': 'The body (or a file in it) is larger than the server accepts',
  'unsupported-media-type': 'The body is not sent with the content type the route reads, or is sent compressed',
  'upstream-auth': 'The model provider rejected the credentials, or no usable key is configured for it',
  'mcp-unavailable': 'An MCP server the template names could not be reached, did not answer as one, or offers a tool no provider takes',
  'harness-unavailable': 'The template\'s harness.kind names a coding agent (or sandbox) this server has not installed',
  'upstream-rate-limited': 'The model provider is rate limiting; its retry-after is passed through',
  'headers-too-large': 'The request headers together are larger than the server accepts',
  'not-implemented': 'A feature this server does not run yet',
  'upstream-error': 'The model provider failed, could not be reached, or sent an answer that could not be used',
  'upstream-rejected': 'The model provider refused the request itself (a context too long, a malformed call), or its content filter stopped the answer',
  'upstream-unavailable': 'Not sent today',
  'upstream-timeout': 'The model provider did not answer within AGENTD_MODEL_TIMEOUT_MS',
  'turn-timeout': 'The turn ran longer than AGENTD_TURN_TIMEOUT_MS',
  'internal': 'A bug in agentd, logged with the request id',
  'unavailable': 'The server is shutting down or too busy to run the turn now, or its database cannot serve the request; send it again',
  'insufficient-storage': "The database's disk is full: nothing of the request was stored",
};

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
