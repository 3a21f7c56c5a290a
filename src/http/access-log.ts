import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * One log line per request, written when it is answered and naming the request, as an access log
 * has. Fastify's default writes a second line when the request arrives: at `info` that doubled the
 * logging's share of a turn's CPU (BENCHMARKS.md, "One request log line"). The arrival line
 * stays at `debug`, where it finds a request that never ended.
 */
export class AccessLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    // Below `debug` pino's `debug` is a no-op, so this costs nothing at the default level.
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime, ...runIds(request) }, 'request errored');
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime, ...runIds(request) }, 'request completed');
  }
}

/**
 * The session and trace a request ran in, so its line leads to the turn's record and its spans
 * (and a trace id a user quotes leads back to the line). A request refused before its hooks ran
 * has no run at all.
 */
function runIds(request: FastifyRequest): { session_id?: string; trace_id?: string } {
  const run = request.run as FastifyRequest['run'] | null;
  return { ...(run?.sessionId ? { session_id: run.sessionId } : {}), ...(run?.traceId ? { trace_id: run.traceId } : {}) };
}
