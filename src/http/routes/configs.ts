import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  DeployBody,
  EnvironmentCreate,
  EnvironmentList,
  EnvironmentRevisionList,
  EnvironmentView,
  ResolvedRevision,
  ResolveRequest,
  RevisionCommit,
  RevisionList,
  RevisionView,
  UndeployBody,
  WorkflowCreate,
  WorkflowCreated,
  WorkflowFamily,
  WorkflowList,
  WorkflowView,
} from '../../contract/configs.ts';
import type { ConfigService } from '../../configs/service.ts';
import type { Store } from '../../store/db.ts';
import { authorize } from '../auth.ts';
import { EMBEDS_HEADER, embedsHeader } from '../invoke-request.ts';
import { bySlug, listQuery, listReply } from '../list-request.ts';
import { documented, listPaging, paging, parameter } from '../route-doc.ts';
import { EMBED_ERRORS, REFERENCE_ERRORS, RUN_CONFIG_ERRORS, TEMPLATE_ERRORS } from '../route-errors.ts';
import { runHeaders } from '../run-headers.ts';
import { pageQuery } from '../session-request.ts';
import { parseWith } from '../validate.ts';

export interface ConfigRoutesDeps {
  store: Store;
  configs: ConfigService;
}

/** A workflow or environment in a path, by id or slug. */
const IdOrSlug = z.string().min(1).max(128);

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

  app.post(
    '/api/workflows',
    documented({
      summary: 'Create a workflow (family workflow, application or evaluator) with its first variant and, when data is given, its first revision',
      role: 'editor',
      errors: [...TEMPLATE_ERRORS, ...EMBED_ERRORS, 'conflict'],
      body: WorkflowCreate,
      ok: { status: 201, schema: WorkflowCreated, description: 'The workflow, and its first revision when data was given' },
    }),
    async (request, reply) => {
      const { projectId } = await authorize(store, request);
      const created = await configs.createWorkflow(projectId, parseWith(WorkflowCreate, request.body));
      reply.code(201);
      return created;
    },
  );

  app.get(
    '/api/workflows',
    documented({
      summary: "List the project's workflows, by slug",
      role: 'viewer',
      query: { family: parameter('Only this family', WorkflowFamily), ...listPaging('Workflows') },
      ok: { status: 200, schema: WorkflowList, description: 'The workflows with their variants (one page of them with limit)' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const scope = { list: 'GET /api/workflows', projectId };
      const family = queryValue(request, 'family', WorkflowFamily);
      const window = listQuery(request, scope);
      return listReply('workflows', await configs.listWorkflows(projectId, family, window), window, scope, bySlug);
    },
  );

  app.post(
    '/api/workflows/resolve',
    documented({
      summary: 'The revision some references name, and its parameters as invoke would run them (x-ag-workflow-embeds: resolve, or flags.resolve, resolves embeds)',
      role: 'viewer',
      errors: RUN_CONFIG_ERRORS,
      body: ResolveRequest,
      headers: EMBEDS_HEADER,
      ok: { status: 200, schema: ResolvedRevision, description: 'The revision and its parameters' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const body = parseWith(ResolveRequest, request.body);
      return configs.resolve(projectId, body.references, body.selector, body.flags?.resolve ?? embedsHeader(request) === 'resolve');
    },
  );

  app.get(
    '/api/workflows/:workflow',
    documented({
      summary: 'Read a workflow, by id or slug, with its variants',
      role: 'viewer',
      errors: ['not-found'],
      ok: { status: 200, schema: WorkflowView, description: 'The workflow' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      return configs.getWorkflow(projectId, param(request, 'workflow'));
    },
  );

  app.post(
    '/api/workflows/:workflow/revisions',
    documented({
      summary: "Commit a variant's next revision (a variant that does not exist yet is created); the template is checked as invoke checks it",
      role: 'editor',
      errors: [...TEMPLATE_ERRORS, ...EMBED_ERRORS, 'not-found'],
      body: RevisionCommit,
      ok: { status: 201, schema: RevisionView, description: 'The new revision' },
    }),
    async (request, reply) => {
      const { projectId } = await authorize(store, request);
      const revision = await configs.commit(projectId, param(request, 'workflow'), parseWith(RevisionCommit, request.body));
      reply.code(201);
      return revision;
    },
  );

  app.get(
    '/api/workflows/:workflow/revisions',
    documented({
      summary: "List a workflow's revisions, newest first",
      role: 'viewer',
      errors: ['not-found'],
      query: { variant: parameter('Only this variant (id or slug)', IdOrSlug), ...paging('Revisions') },
      ok: { status: 200, schema: RevisionList, description: 'One page of revisions' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const workflow = param(request, 'workflow');
      const page = await configs.listRevisions(projectId, workflow, pageQuery(request), queryValue(request, 'variant', IdOrSlug));
      return { count: page.items.length, revisions: page.items, ...(page.next ? { next: page.next } : {}) };
    },
  );

  app.post(
    '/api/environments',
    documented({
      summary: 'Create an environment (e.g. development, production)',
      role: 'editor',
      errors: ['conflict'],
      body: EnvironmentCreate,
      ok: { status: 201, schema: EnvironmentView, description: 'The environment, deploying nothing yet' },
    }),
    async (request, reply) => {
      const { projectId } = await authorize(store, request);
      const created = await configs.createEnvironment(projectId, parseWith(EnvironmentCreate, request.body));
      reply.code(201);
      return created;
    },
  );

  app.get(
    '/api/environments',
    documented({
      summary: "List the project's environments with what each deploys, by slug",
      role: 'viewer',
      query: listPaging('Environments'),
      ok: { status: 200, schema: EnvironmentList, description: 'The environments (one page of them with limit)' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const scope = { list: 'GET /api/environments', projectId };
      const window = listQuery(request, scope);
      return listReply('environments', await configs.listEnvironments(projectId, window), window, scope, bySlug);
    },
  );

  app.get(
    '/api/environments/:environment',
    documented({
      summary: 'Read an environment, by id or slug, with what it deploys now',
      role: 'viewer',
      errors: ['not-found'],
      ok: { status: 200, schema: EnvironmentView, description: 'The environment and its newest revision' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      return configs.getEnvironment(projectId, param(request, 'environment'));
    },
  );

  app.get(
    '/api/environments/:environment/revisions',
    documented({
      summary: "List an environment's revisions (its deploy history), newest first",
      role: 'viewer',
      errors: ['not-found'],
      query: paging('Revisions'),
      ok: { status: 200, schema: EnvironmentRevisionList, description: 'One page of environment revisions' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const page = await configs.listEnvironmentRevisions(projectId, param(request, 'environment'), pageQuery(request));
      return { count: page.items.length, revisions: page.items, ...(page.next ? { next: page.next } : {}) };
    },
  );

  app.post(
    '/api/environments/:environment/deploy',
    documented({
      summary: "Deploy a workflow revision under a key (default: the workflow's slug): commits the environment's next revision",
      role: 'editor',
      errors: [...REFERENCE_ERRORS, 'not-found'],
      body: DeployBody,
      ok: { status: 200, schema: EnvironmentView, description: 'The environment with its new revision' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      return configs.deploy(projectId, param(request, 'environment'), parseWith(DeployBody, request.body));
    },
  );

  app.post(
    '/api/environments/:environment/undeploy',
    documented({
      summary: "Remove a key from what an environment deploys: commits the environment's next revision",
      role: 'editor',
      errors: ['not-found'],
      body: UndeployBody,
      ok: { status: 200, schema: EnvironmentView, description: 'The environment with its new revision' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      return configs.undeploy(projectId, param(request, 'environment'), parseWith(UndeployBody, request.body));
    },
  );
}
