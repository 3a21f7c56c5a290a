import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.ts';
import { InspectRequest } from '../../contract/inspect.ts';
import { inspectAgentWorkflow } from '../../agent/workflow.ts';
import type { Store } from '../../store/db.ts';
import { authorize } from '../auth.ts';
import { parseWith } from '../validate.ts';

/** `POST /services/agent/v0/inspect` (spec §4.3). */
export async function inspectRoutes(app: FastifyInstance, deps: { store: Store; config: Config }): Promise<void> {
  app.post('/services/agent/v0/inspect', async (request) => {
    await authorize(deps.store, request, 'viewer');
    return inspectAgentWorkflow(parseWith(InspectRequest, request.body), deps.config.defaultLlm);
  });
}
