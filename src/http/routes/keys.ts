import type { FastifyInstance, FastifyRequest } from 'fastify';
import { KeyCreate, KeyCreated, KeyList, KeySelf, type KeyView } from '../../contract/keys.ts';
import { AppError } from '../../errors.ts';
import type { ApiKeyInfo } from '../../store/api-keys.ts';
import type { Store } from '../../store/db.ts';
import { authorize } from '../auth.ts';
import { listQuery, listReply } from '../list-request.ts';
import { documented, listPaging } from '../route-doc.ts';
import { parseWith } from '../validate.ts';

export interface KeyRoutesDeps {
  store: Store;
}

function toKeyView(key: ApiKeyInfo): KeyView {
  return {
    id: key.id,
    prefix: key.prefix,
    role: key.role,
    created_at: key.created_at,
    ...(key.last_used_at ? { last_used_at: key.last_used_at } : {}),
    ...(key.revoked_at ? { revoked_at: key.revoked_at } : {}),
  };
}

function keyIdParam(request: FastifyRequest): string {
  const id = (request.params as { key_id?: unknown }).key_id;
  if (typeof id !== 'string' || !/^[A-Za-z0-9-]{1,64}$/.test(id)) throw new AppError('invalid-request', 'the key id in the path must be the id GET /api/keys lists');
  return id;
}

const keyNotFound = (id: string) => new AppError('not-found', `this project has no API key "${id}"; GET /api/keys lists them`);

/**
 * API keys over HTTP (design.md §4 "Auth"). Any key may ask who it is; managing the project's keys
 * takes `admin`, as `agentd keys` does beside the database.
 */
export async function keyRoutes(app: FastifyInstance, deps: KeyRoutesDeps): Promise<void> {
  const { store } = deps;

  app.get(
    '/api/keys/self',
    documented({
      summary: 'The calling API key and its project',
      role: 'viewer',
      ok: { status: 200, schema: KeySelf, description: 'The key (never its secret) and its project' },
    }),
    async (request) => {
      const { projectId, keyId } = await authorize(store, request);
      const [project, key] = await Promise.all([store.projects.findById(projectId), store.apiKeys.get(projectId, keyId)]);
      if (!project || !key) throw new AppError('unauthenticated', 'the API key is invalid or revoked');
      return { project: { id: project.id, name: project.name }, key: toKeyView(key) };
    },
  );

  app.get(
    '/api/keys',
    documented({
      summary: "The project's API keys, revoked ones included",
      role: 'admin',
      query: listPaging('Keys'),
      ok: { status: 200, schema: KeyList, description: 'Every key of the project (one page of them with limit), oldest first' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const scope = { list: 'GET /api/keys', projectId };
      const window = listQuery(request, scope);
      const keys = (await store.apiKeys.list(projectId, window)).map(toKeyView);
      return listReply('keys', keys, window, scope, (key) => ({ key: key.created_at, id: key.id }));
    },
  );

  app.post(
    '/api/keys',
    documented(
      {
        summary: 'Create an API key of the project; its secret is in this reply only',
        role: 'admin',
        body: KeyCreate,
        ok: { status: 201, schema: KeyCreated, description: 'The new key, with its secret in `key`' },
      },
      { optionalBody: true },
    ),
    async (request, reply) => {
      const { projectId } = await authorize(store, request);
      const { role } = parseWith(KeyCreate, request.body);
      const created = await store.apiKeys.create(projectId, role);
      const key = await store.apiKeys.get(projectId, created.id);
      reply.code(201);
      return { ...toKeyView(key!), key: created.key };
    },
  );

  app.delete(
    '/api/keys/:key_id',
    documented(
      {
        summary: 'Revoke an API key',
        role: 'admin',
        errors: ['not-found'],
        ok: { status: 204, description: 'Revoked' },
      },
      { optionalBody: true },
    ),
    async (request, reply) => {
      const { projectId } = await authorize(store, request);
      const id = keyIdParam(request);
      const key = await store.apiKeys.get(projectId, id);
      if (!key) throw keyNotFound(id);
      await store.apiKeys.revoke(id, projectId);
      return reply.code(204).send();
    },
  );
}
