import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  DeployBody,
  EnvironmentCreate,
  ResolveRequest,
  RevisionCommit,
  UndeployBody,
  WorkflowCreate,
  WorkflowFamily,
} from '../../contract/configs.ts';
import type { ConfigService } from '../../configs/service.ts';
import type { Store } from '../../store/db.ts';
import { authorize } from '../auth.ts';
import { embedsHeader } from '../invoke-request.ts';
import { runHeaders } from '../run-headers.ts';
import { pageQuery } from '../session-request.ts';
import { parseWith } from '../validate.ts';

export interface ConfigRoutesDeps {
  store: Store;
  configs: ConfigService;
}

/** A workflow or environment in a path, by id or slug. */
export const IdOrSlug = z.string().min(1).max(128);

function param(request: FastifyRequest, name: string): string {
  return parseWith(IdOrSlug, (request.params as Record<string, unknown>)[name], name);
}

function queryValue<S extends z.ZodType>(request: FastifyRequest, name: string, schema: S): z.output<S> | undefined {
  const value = (request.query as Record<string, unknown> | undefined)?.[name];
  return value === undefined || value === '' ? undefined : parseWith(schema, value, `query parameter ${name}`);
}

/**
 * Stored configurations on the `/api` surface (design.md §3 `configs/`): workflows of the three
 * families with variants and immutable revisions, and environments that deploy them. Reading takes
 * `viewer`; creating, committing and deploying take `editor`, as running turns does.
 */
export async function configRoutes(app: FastifyInstance, deps: ConfigRoutesDeps): Promise<void> {
  const { store, configs } = deps;
  app.addHook('onSend', async (_request, reply) => {
    reply.headers(runHeaders({}));
  });

  app.post('/api/workflows', async (request, reply) => {
    const { projectId } = await authorize(store, request, 'editor');
    const created = await configs.createWorkflow(projectId, parseWith(WorkflowCreate, request.body));
    reply.code(201);
    return created;
  });

  app.get('/api/workflows', async (request) => {
    const { projectId } = await authorize(store, request, 'viewer');
    const workflows = await configs.listWorkflows(projectId, queryValue(request, 'family', WorkflowFamily));
    return { count: workflows.length, workflows };
  });

  app.post('/api/workflows/resolve', async (request) => {
    const { projectId } = await authorize(store, request, 'viewer');
    const body = parseWith(ResolveRequest, request.body);
    return configs.resolve(projectId, body.references, body.selector, body.flags?.resolve ?? embedsHeader(request) === 'resolve');
  });

  app.get('/api/workflows/:workflow', async (request) => {
    const { projectId } = await authorize(store, request, 'viewer');
    return configs.getWorkflow(projectId, param(request, 'workflow'));
  });

  app.post('/api/workflows/:workflow/revisions', async (request, reply) => {
    const { projectId } = await authorize(store, request, 'editor');
    const revision = await configs.commit(projectId, param(request, 'workflow'), parseWith(RevisionCommit, request.body));
    reply.code(201);
    return revision;
  });

  app.get('/api/workflows/:workflow/revisions', async (request) => {
    const { projectId } = await authorize(store, request, 'viewer');
    const workflow = param(request, 'workflow');
    const page = await configs.listRevisions(projectId, workflow, pageQuery(request), queryValue(request, 'variant', IdOrSlug));
    return { count: page.items.length, revisions: page.items, ...(page.next ? { next: page.next } : {}) };
  });

  app.post('/api/environments', async (request, reply) => {
    const { projectId } = await authorize(store, request, 'editor');
    const created = await configs.createEnvironment(projectId, parseWith(EnvironmentCreate, request.body));
    reply.code(201);
    return created;
  });

  app.get('/api/environments', async (request) => {
    const { projectId } = await authorize(store, request, 'viewer');
    const environments = await configs.listEnvironments(projectId);
    return { count: environments.length, environments };
  });

  app.get('/api/environments/:environment', async (request) => {
    const { projectId } = await authorize(store, request, 'viewer');
    return configs.getEnvironment(projectId, param(request, 'environment'));
  });

  app.get('/api/environments/:environment/revisions', async (request) => {
    const { projectId } = await authorize(store, request, 'viewer');
    const page = await configs.listEnvironmentRevisions(projectId, param(request, 'environment'), pageQuery(request));
    return { count: page.items.length, revisions: page.items, ...(page.next ? { next: page.next } : {}) };
  });

  app.post('/api/environments/:environment/deploy', async (request) => {
    const { projectId } = await authorize(store, request, 'editor');
    return configs.deploy(projectId, param(request, 'environment'), parseWith(DeployBody, request.body));
  });

  app.post('/api/environments/:environment/undeploy', async (request) => {
    const { projectId } = await authorize(store, request, 'editor');
    return configs.undeploy(projectId, param(request, 'environment'), parseWith(UndeployBody, request.body));
  });
}
