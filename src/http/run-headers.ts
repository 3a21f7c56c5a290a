import type { FastifyReply } from 'fastify';
import { CONTRACT_VERSION } from '../contract/invoke.ts';
import { traceparentOf } from '../telemetry/trace-context.ts';

/** The response headers of a run (spec §4.1), for JSON replies and streams alike. */
export function runHeaders(run: { sessionId?: string | undefined; traceId?: string | undefined; spanId?: string | undefined }): Record<string, string> {
  const headers: Record<string, string> = { 'x-ag-version': CONTRACT_VERSION };
  if (run.traceId) headers['x-ag-trace-id'] = run.traceId;
  if (run.spanId) headers['x-ag-span-id'] = run.spanId;
  if (run.traceId && run.spanId) headers.traceparent = traceparentOf({ traceId: run.traceId, spanId: run.spanId, sampled: true });
  if (run.sessionId) {
    headers['x-ag-session-id'] = run.sessionId;
    // Every character a session id may hold is a legal baggage value octet (W3C Baggage), so the
    // id goes in as it is: `ag.session.id=<session_id>`, as spec §4.1 writes it.
    headers.baggage = `ag.session.id=${run.sessionId}`;
  }
  return headers;
}

/**
 * The headers hooks have set on a reply (its request id, CORS), for a stream written to the socket
 * directly, which Fastify's own sending would otherwise have added.
 */
export function replyHeaders(reply: FastifyReply): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (typeof value === 'string' || Array.isArray(value)) out[name] = value;
    else if (typeof value === 'number') out[name] = String(value);
  }
  return out;
}
