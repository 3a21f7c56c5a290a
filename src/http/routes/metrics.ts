import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.ts';
import { AppError } from '../../errors.ts';
import type { ServiceMetrics } from '../../telemetry/metrics.ts';

/** A token compared in constant time, so its answer's speed tells nothing of how much of it was right. */
function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * `GET /metrics` in the Prometheus text format. It has its own token (AGENTD_METRICS_TOKEN, sent
 * as `Authorization: Bearer …`), not an API key: a scraper belongs to the operator, not a project,
 * and what it reads spans every project. Registered only when the operator turned metrics on.
 */
export async function metricsRoute(app: FastifyInstance, deps: { metrics: ServiceMetrics; access: NonNullable<Config['metrics']> }): Promise<void> {
  const { metrics, access } = deps;
  app.get('/metrics', async (request, reply) => {
    if (access !== 'open') {
      const match = /^bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
      if (!match || !sameToken(match[1]!, access.token)) {
        throw new AppError('unauthenticated', 'the metrics need "Authorization: Bearer <AGENTD_METRICS_TOKEN>"');
      }
    }
    return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
}
