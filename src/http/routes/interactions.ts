import type { FastifyInstance } from 'fastify';
import { InteractionQuery, RespondBody, TransitionBody } from '../../contract/interactions.ts';
import type { InteractionService } from '../../interactions/service.ts';
import type { Store } from '../../store/db.ts';
import { authorize } from '../auth.ts';
import { parseWith } from '../validate.ts';

export interface InteractionRoutesDeps {
  store: Store;
  interactions: InteractionService;
}

/** The interactions API (spec §4.4), on the `/api` surface with the same auth as invoke. */
export async function interactionRoutes(app: FastifyInstance, deps: InteractionRoutesDeps): Promise<void> {
  const { store, interactions } = deps;

  app.post('/api/sessions/interactions/query', async (request) => {
    const { projectId } = await authorize(store, request, 'viewer');
    return interactions.query(projectId, parseWith(InteractionQuery, request.body));
  });

  app.get<{ Params: { id: string } }>('/api/sessions/interactions/:id', async (request) => {
    const { projectId } = await authorize(store, request, 'viewer');
    return interactions.get(projectId, request.params.id);
  });

  app.post<{ Params: { id: string } }>('/api/sessions/interactions/:id/respond', async (request) => {
    const { projectId } = await authorize(store, request, 'editor');
    const { answer } = parseWith(RespondBody, request.body);
    return interactions.respond(projectId, request.params.id, answer);
  });

  app.post('/api/sessions/interactions/transition', async (request) => {
    const { projectId } = await authorize(store, request, 'editor');
    return interactions.transition(projectId, parseWith(TransitionBody, request.body));
  });
}
