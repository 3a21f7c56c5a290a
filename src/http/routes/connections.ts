import type { FastifyInstance, FastifyRequest } from 'fastify';
import { refuseBaseUrl, type ConnectionAddresses } from '../../agent/connection-address.ts';
import { ConnectionCreate, ConnectionList, ConnectionSlug, ConnectionView } from '../../contract/connections.ts';
import { AppError } from '../../errors.ts';
import type { Store } from '../../store/db.ts';
import { authorize } from '../auth.ts';
import { bySlug, listQuery, listReply } from '../list-request.ts';
import { documented, listPaging } from '../route-doc.ts';
import { runHeaders } from '../run-headers.ts';
import { parseWith } from '../validate.ts';

export interface ConnectionRoutesDeps {
  store: Store;
  /** Where a base URL may point (AGENTD_CONNECTION_ALLOWED_HOSTS). */
  addresses: ConnectionAddresses;
}

function slugParam(request: FastifyRequest): string {
  return parseWith(ConnectionSlug, (request.params as { slug?: unknown }).slug, 'slug');
}

/** Another project's connection gets the same answer as one that never existed. */
function connectionNotFound(slug: string): AppError {
  return new AppError('not-found', `this project has no connection "${slug}"; GET /api/connections lists the ones it has`);
}

/**
 * Project connections (design.md §4 "Connections"). They hold provider keys, so creating and
 * deleting them takes the `admin` role, like managing API keys; reading them, which never shows a
 * key, takes `viewer`.
 */
export async function connectionRoutes(app: FastifyInstance, deps: ConnectionRoutesDeps): Promise<void> {
  const { store, addresses } = deps;

  app.post(
    '/api/connections',
    documented({
      summary: 'Store a project connection: a provider, its base URL and API key (encrypted at rest, never returned), for llm.connection {mode: "project", slug}',
      role: 'admin',
      errors: ['conflict'],
      body: ConnectionCreate,
      ok: { status: 201, schema: ConnectionView, description: 'The connection, without its key' },
    }),
    async (request, reply): Promise<ConnectionView> => {
      const { projectId } = await authorize(store, request);
      const input = parseWith(ConnectionCreate, request.body);
      // A host name is judged where it resolves, on each call (src/agent/model.ts).
      if (input.base_url) refuseBaseUrl(input.base_url, addresses, 'base_url');
      const created = await store.connections.create(projectId, input);
      reply.code(201).headers(runHeaders({}));
      return created;
    },
  );

  app.get(
    '/api/connections',
    documented({
      summary: "List the project's connections, by slug",
      role: 'viewer',
      query: listPaging('Connections'),
      ok: { status: 200, schema: ConnectionList, description: 'Every connection of the project (one page of them with limit), without keys' },
    }),
    async (request, reply): Promise<ConnectionList> => {
      const { projectId } = await authorize(store, request);
      const scope = { list: 'GET /api/connections', projectId };
      const window = listQuery(request, scope);
      const connections = await store.connections.list(projectId, window);
      reply.headers(runHeaders({}));
      return listReply('connections', connections, window, scope, bySlug);
    },
  );

  app.get(
    '/api/connections/:slug',
    documented({
      summary: 'Read one connection',
      role: 'viewer',
      errors: ['not-found'],
      ok: { status: 200, schema: ConnectionView, description: 'The connection, without its key' },
    }),
    async (request, reply): Promise<ConnectionView> => {
      const { projectId } = await authorize(store, request);
      const slug = slugParam(request);
      const connection = await store.connections.get(projectId, slug);
      if (!connection) throw connectionNotFound(slug);
      reply.headers(runHeaders({}));
      return connection;
    },
  );

  app.delete(
    '/api/connections/:slug',
    documented(
      {
        summary: 'Delete a connection; templates naming it get 404 from then on',
        role: 'admin',
        errors: ['not-found'],
        ok: { status: 204, description: 'Deleted' },
      },
      { optionalBody: true },
    ),
    async (request, reply) => {
      const { projectId } = await authorize(store, request);
      const slug = slugParam(request);
      if (!(await store.connections.remove(projectId, slug))) throw connectionNotFound(slug);
      return reply.code(204).headers(runHeaders({})).send();
    },
  );
}
