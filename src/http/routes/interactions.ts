import type { FastifyInstance } from 'fastify';
import { InteractionList, InteractionListQuery, InteractionQuery, InteractionReply, isWindowedQuery, RespondBody, TransitionBody, WindowedInteractionQuery, type InteractionRecord } from '../../contract/interactions.ts';
import type { InteractionService } from '../../interactions/service.ts';
import type { Store } from '../../store/db.ts';
import { authorize } from '../auth.ts';
import { documented } from '../route-doc.ts';
import { CONTINUATION_ERRORS } from '../route-errors.ts';
import { parseWith } from '../validate.ts';

export interface InteractionRoutesDeps {
  store: Store;
  interactions: InteractionService;
}

const reply = (record: InteractionRecord): InteractionReply => ({ ...record, count: 1, interaction: record });

/** The interactions API (spec §4.4), on the `/api` surface with the same auth as invoke. */
export async function interactionRoutes(app: FastifyInstance, deps: InteractionRoutesDeps): Promise<void> {
  const { store, interactions } = deps;

  // Every filter is optional: no body lists them all, whatever the Content-Type says.
  app.post(
    '/api/sessions/interactions/query',
    documented(
      {
        summary: 'List interactions',
        role: 'viewer',
        body: InteractionListQuery,
        ok: { status: 200, schema: InteractionList, description: 'One page of interactions, oldest first' },
      },
      { optionalBody: true },
    ),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const query = isWindowedQuery(request.body) ? parseWith(WindowedInteractionQuery, request.body) : parseWith(InteractionQuery, request.body);
      return interactions.query(projectId, query);
    },
  );

  // Named as the document names it, so its replies are checked against the document (test/support/conformance.ts).
  app.get<{ Params: { interaction_id: string } }>(
    '/api/sessions/interactions/:interaction_id',
    documented({
      summary: 'Read one interaction',
      role: 'viewer',
      errors: ['not-found'],
      ok: { status: 200, schema: InteractionReply, description: 'The interaction' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      return reply(await interactions.get(projectId, request.params.interaction_id));
    },
  );

  app.post<{ Params: { interaction_id: string } }>(
    '/api/sessions/interactions/:interaction_id/respond',
    documented({
      summary: 'Answer a pending interaction; the paused turn then continues by itself',
      role: 'editor',
      errors: [...CONTINUATION_ERRORS, 'interaction-not-pending'],
      body: RespondBody,
      ok: { status: 200, schema: InteractionReply, description: 'The interaction, now responded' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const { answer } = parseWith(RespondBody, request.body);
      return reply(await interactions.respond(projectId, request.params.interaction_id, answer));
    },
  );

  app.post(
    '/api/sessions/interactions/transition',
    documented({
      summary: 'Move an interaction to resolved or cancelled',
      role: 'editor',
      errors: [...CONTINUATION_ERRORS, 'interaction-not-pending'],
      body: TransitionBody,
      ok: { status: 200, schema: InteractionReply, description: 'The interaction after the move' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      return reply(await interactions.transition(projectId, parseWith(TransitionBody, request.body)));
    },
  );
}
