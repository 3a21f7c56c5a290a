import { ERROR_MEANINGS, ERROR_TYPES, type ErrorType } from '../contract/errors.ts';
import type { DocumentedRoute } from './route-doc.ts';

/**
 * The error statuses /openapi.json lists for a route, each with the types it stands for there.
 * A route's doc names only the types its own work answers with (`errors`); those every route of
 * the API can answer, and those its shape brings (a body, a session id, the project_id it needs),
 * are added here, so no route repeats them. Statuses and meanings come from the one table of
 * types (src/contract/errors.ts).
 */

/** A template checked as a turn checks it (agent/template.ts). */
export const TEMPLATE_ERRORS = ['invalid-template-shape', 'unknown-template-key', 'invalid-permission-mode', 'unsupported-kind'] as const satisfies readonly ErrorType[];

/** References resolved to a stored revision (configs/references.ts). */
export const REFERENCE_ERRORS = ['conflicting-references', 'ambiguous-reference', 'unknown-reference'] as const satisfies readonly ErrorType[];

/** A configuration's embeds resolved (configs/embeds.ts): the references they hold, and their bounds. */
export const EMBED_ERRORS = [...REFERENCE_ERRORS, 'embed-cycle', 'embed-limit'] as const satisfies readonly ErrorType[];

/** References resolved to a configuration to run, its embeds only when asked (configs/run-config.ts). */
export const RUN_CONFIG_ERRORS = [...EMBED_ERRORS, 'unresolved-embed'] as const satisfies readonly ErrorType[];

/** What a paused turn's continuation is refused with when it could not go on with the server's own keys (interactions/service.ts). */
export const CONTINUATION_ERRORS = ['not-found', 'upstream-auth', 'harness-unavailable'] as const satisfies readonly ErrorType[];

/** What a turn can fail with before its reply begins (sessions/turn-service.ts and the engines it runs). */
export const TURN_ERRORS = [
  ...TEMPLATE_ERRORS,
  ...RUN_CONFIG_ERRORS,
  ...CONTINUATION_ERRORS,
  'unsupported-version',
  'invalid-messages',
  'invalid-approval',
  'not-acceptable',
  'session-busy',
  'turn-cancelled',
  'interaction-not-pending',
  'mcp-unavailable',
  'upstream-rate-limited',
  'upstream-error',
  'upstream-rejected',
  'unavailable',
  'upstream-timeout',
  'turn-timeout',
] as const satisfies readonly ErrorType[];

/** Every route of the API: a bad URL, query or header; its key (auth.ts), read from the database, which may fail (store/unavailable.ts); a bug. */
const EVERY_ROUTE: readonly ErrorType[] = ['invalid-request', 'unauthenticated', 'forbidden', 'internal', 'unavailable', 'insufficient-storage'];

/** A route Fastify reads a body for: the body can be too large, of another type, not JSON, or too slow. */
const READS_BODY: readonly ErrorType[] = ['payload-too-large', 'unsupported-media-type', 'request-timeout'];

/** Whether a JSON Schema has a `session_id` property at any depth: parseWith (validate.ts) refuses a bad one as invalid-session-id. */
function hasSessionId(schema: unknown): boolean {
  if (typeof schema !== 'object' || schema === null) return false;
  const { properties } = schema as { properties?: Record<string, unknown> };
  if (properties && 'session_id' in properties) return true;
  return Object.values(schema).some(hasSessionId);
}

/** The error types `route` can answer with, in the table's order. */
export function routeErrorTypes(route: DocumentedRoute, bodySchema: unknown): ErrorType[] {
  const types = new Set<ErrorType>([...EVERY_ROUTE, ...(route.errors ?? [])]);
  if (route.path.startsWith('/services/')) types.add('missing-project-id');
  if (route.method !== 'get') {
    for (const type of READS_BODY) types.add(type);
    // A raw body's parser takes any bytes; JSON is parsed wherever no such parser stands instead.
    if (!route.rawBody) types.add('invalid-json');
  }
  if (route.params.includes('session_id') || 'x-ag-session-id' in (route.headers ?? {}) || hasSessionId(bodySchema)) types.add('invalid-session-id');
  return (Object.keys(ERROR_TYPES) as ErrorType[]).filter((type) => types.has(type));
}

/** The document's responses for these types: one per status, its description the meaning of each type it stands for. */
export function errorResponses(types: readonly ErrorType[], envelope: object): Record<string, { description: string; content: Record<string, { schema: object }> }> {
  const byStatus = new Map<number, ErrorType[]>();
  for (const type of types) byStatus.set(ERROR_TYPES[type], [...(byStatus.get(ERROR_TYPES[type]) ?? []), type]);
  return Object.fromEntries(
    [...byStatus.entries()]
      .sort(([a], [b]) => a - b)
      .map(([status, inStatus]) => [
        String(status),
        {
          description: `An error in the envelope; status.type is ${inStatus.length === 1 ? 'this' : 'one of these'}:\n\n${inStatus.map((type) => `- \`${type}\`: ${ERROR_MEANINGS[type]}`).join('\n')}`,
          content: { 'application/json': { schema: envelope } },
        },
      ]),
  );
}
