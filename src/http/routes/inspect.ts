import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.ts';
import { InspectRequest, InspectResponse } from '../../contract/inspect.ts';
import { checkVersion } from '../../sessions/invoke-plan.ts';
import { inspectAgentWorkflow } from '../../agent/workflow.ts';
import { inlineRevisionParameters, resolveRunConfig } from '../../configs/run-config.ts';
import type { Store } from '../../store/db.ts';
import { authorize, SERVICES } from '../auth.ts';
import { EMBEDS_HEADER, embedsHeader } from '../invoke-request.ts';
import { documented } from '../route-doc.ts';
import { RUN_CONFIG_ERRORS, TEMPLATE_ERRORS } from '../route-errors.ts';
import { parseWith } from '../validate.ts';

/** `POST /services/agent/v0/inspect` (spec §4.3). */
export async function inspectRoutes(app: FastifyInstance, deps: { store: Store; config: Config }): Promise<void> {
  // Every inspect field is optional, so a bodiless POST that still says JSON asks for the defaults,
  // as one with no Content-Type does.
  app.post(
    '/services/agent/v0/inspect',
    documented(
      {
        summary: 'The resolved agent workflow revision (schemas, default template) and a ready-made invoke request',
        role: 'viewer',
        errors: [...TEMPLATE_ERRORS, ...RUN_CONFIG_ERRORS, 'unsupported-version'],
        body: InspectRequest,
        headers: EMBEDS_HEADER,
        ok: { status: 200, schema: InspectResponse, description: 'The revision and a request that runs as is' },
      },
      { optionalBody: true },
    ),
    async (request) => {
      const { projectId } = await authorize(deps.store, request, SERVICES);
      const body = parseWith(InspectRequest, request.body);
      checkVersion(body.version);
      const config = await resolveRunConfig(deps.store.configs, projectId, {
        references: body.references,
        selector: body.selector,
        parameters: inlineRevisionParameters(body.revision, 'revision'),
        parametersAt: 'revision.data.parameters',
        resolveEmbeds: body.flags?.resolve ?? embedsHeader(request) === 'resolve',
      });
      return inspectAgentWorkflow(body, deps.config.defaultLlm, config);
    },
  );
}
