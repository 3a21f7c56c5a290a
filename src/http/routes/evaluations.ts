import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  EvaluationCreate,
  EvaluationList,
  EvaluationReply,
  MetricsList,
  MetricsQuery,
  ResultList,
  ResultsQuery,
  RunReply,
  TestsetCreate,
  TestsetEdit,
  TestsetList,
  TestsetQuery,
  TestsetReply,
  type EvaluationView,
  type TestsetView,
} from '../../contract/evaluations.ts';
import { ConfigSlug } from '../../contract/configs.ts';
import type { RunService } from '../../evaluation/runs.ts';
import { CSV_DELIMITERS, parseCsv, parseJsonl, toTestcases } from '../../evaluation/testset-import.ts';
import type { TestsetService } from '../../evaluation/testsets.ts';
import { AppError } from '../../errors.ts';
import { allOf } from '../../objects.ts';
import type { Store } from '../../store/db.ts';
import { authorize } from '../auth.ts';
import { bySlug, listQuery, listReply, listWindowing } from '../list-request.ts';
import { documented, listPaging, paging, parameter } from '../route-doc.ts';
import { EMBED_ERRORS, TEMPLATE_ERRORS } from '../route-errors.ts';
import { runHeaders } from '../run-headers.ts';
import { pageQuery } from '../session-request.ts';
import { checkBodyDepth, parseWith } from '../validate.ts';

export interface EvaluationRoutesDeps {
  store: Store;
  testsets: TestsetService;
  runs: RunService;
}

const Id = z.string().min(1).max(256);
const param = (request: FastifyRequest, name: string) => parseWith(Id, (request.params as Record<string, unknown>)[name], name);

const ImportQuery = z.object({
  format: z.enum(['csv', 'jsonl']).optional(),
  slug: ConfigSlug.optional(),
  name: z.string().min(1).max(256).optional(),
  /** The text column that becomes the user message when the file has no `messages` column. */
  input: z.string().min(1).max(128).optional(),
  /** Commit the file as a new revision of this test set instead of creating one. */
  testset: Id.optional(),
  /** A CSV file's column separator (`tab` names the tab); absent, the one its header line uses. */
  delimiter: z.enum([...CSV_DELIMITERS, 'tab']).optional(),
});

const CSV = 'text/csv';
const JSONL = ['application/x-ndjson', 'application/jsonl'];
/** The content types an import's file may come as. */
const IMPORT_TYPES = [CSV, ...JSONL] as const;
const JSONL_EXAMPLE = '{"input": "How do I reset my password?", "expected": "Settings"}\n{"input": "Can I pay by invoice?", "expected": "invoice"}\n';
/** A file of each type, as the API reference offers it to send: two questions and what their answers should hold. */
const IMPORT_EXAMPLES = {
  [CSV]: 'input,expected\nHow do I reset my password?,Settings\nCan I pay by invoice?,invoice\n',
  ...Object.fromEntries(JSONL.map((type) => [type, JSONL_EXAMPLE])),
};

const testsetReply = (testset: TestsetView) => ({ count: 1, revision_id: testset.revision_id, testset });
const evaluationReply = (evaluation: EvaluationView) => ({ count: 1, evaluation, data: evaluation.data });

/**
 * Test sets and evaluation runs (spec §4.5), on the paths the reference uses. Replies carry
 * `count` beside the object, as the reference's do. Reading takes `viewer`; the rest `editor`.
 */
export async function evaluationRoutes(app: FastifyInstance, deps: EvaluationRoutesDeps): Promise<void> {
  const { store, testsets, runs } = deps;
  app.addHook('onSend', async (_request, reply) => {
    reply.headers(runHeaders({}));
  });
  // Imports arrive as the file itself; only these routes accept such bodies.
  // Read as bytes and decoded strictly: a file that is not UTF-8 is a 400, not rows of U+FFFD.
  app.addContentTypeParser([...IMPORT_TYPES], { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, new TextDecoder('utf-8', { fatal: true }).decode(body as Buffer));
    } catch {
      done(new AppError('invalid-request', 'the file is not valid UTF-8; save it as UTF-8 and send it again'), undefined);
    }
  });

  app.post(
    '/api/simple/testsets/',
    documented({
      summary: 'Create a test set and its rows in one call; the reply carries revision_id',
      role: 'editor',
      errors: ['conflict'],
      body: TestsetCreate,
      ok: { status: 200, schema: TestsetReply, description: 'The test set, its first revision and its rows with their ids' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const { testset } = parseWith(TestsetCreate, request.body);
      return testsetReply(await testsets.create(projectId, testset));
    },
  );

  app.post(
    '/api/simple/testsets/import',
    documented({
      summary: 'Create a test set from a CSV or JSONL file (or commit it as a new revision of ?testset=); a messages column holds a JSON array of messages, else the input/question column (or ?input=) becomes one user message',
      role: 'editor',
      errors: ['conflict', 'not-found'],
      rawBody: [...IMPORT_TYPES],
      rawExamples: IMPORT_EXAMPLES,
      query: {
        format: parameter('csv or jsonl (else from Content-Type)', ImportQuery.shape.format),
        slug: parameter("The new test set's slug", ImportQuery.shape.slug),
        name: parameter('Its name', ImportQuery.shape.name),
        input: parameter('The text column to turn into the user message', ImportQuery.shape.input),
        testset: parameter('Commit to this test set (id or slug) instead', ImportQuery.shape.testset),
        delimiter: parameter("A CSV file's column separator (tab for a tab); absent, the one its header line uses", ImportQuery.shape.delimiter),
      },
      ok: { status: 200, schema: TestsetReply, description: 'The test set' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const query = parseWith(ImportQuery, request.query, 'query');
      const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      const format = query.format ?? (type === CSV ? 'csv' : JSONL.includes(type) ? 'jsonl' : undefined);
      if (typeof request.body !== 'string' || format === undefined) {
        throw new AppError('unsupported-media-type', `send the file as ${CSV} or ${JSONL.join(' / ')} (or say ?format=csv|jsonl)`);
      }
      const rows = format === 'csv' ? parseCsv(request.body, query.delimiter === 'tab' ? '\t' : query.delimiter) : parseJsonl(request.body);
      const testcases = toTestcases(rows, query.input ? { input: query.input } : {});
      // A file's JSON is held to the nesting a JSON body is held to (storing it walks it recursively).
      checkBodyDepth({ testcases });
      const input = { slug: query.slug, name: query.name, data: { testcases } };
      return testsetReply(query.testset ? await testsets.edit(projectId, query.testset, input) : await testsets.create(projectId, input));
    },
  );

  app.get(
    '/api/simple/testsets/',
    documented({
      summary: "List the project's test sets by slug (row ids, without the rows)",
      role: 'viewer',
      query: listPaging('Test sets'),
      ok: { status: 200, schema: TestsetList, description: 'The test sets (one page of them with limit)' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const scope = { list: 'GET /api/simple/testsets/', projectId };
      const window = listQuery(request, scope);
      return listReply('testsets', await testsets.list(projectId, window), window, scope, bySlug);
    },
  );

  app.post(
    '/api/simple/testsets/query',
    documented(
      {
        summary: "List test sets by the reference's query: attributes, names; windowing.limit pages (windowing.next continues), by slug",
        role: 'viewer',
        body: TestsetQuery,
        ok: { status: 200, schema: TestsetList, description: 'The test sets that match (one page of them with windowing.limit)' },
      },
      { optionalBody: true },
    ),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const query = parseWith(TestsetQuery, request.body);
      const scope = { list: 'POST /api/simple/testsets/query', projectId };
      const window = listWindowing(query.windowing, scope);
      return listReply('testsets', await testsets.query(projectId, query, window), window, scope, bySlug);
    },
  );

  app.get(
    '/api/simple/testsets/:testset_id',
    documented({
      summary: 'Read a test set (id or slug): its newest revision and rows',
      role: 'viewer',
      errors: ['not-found'],
      ok: { status: 200, schema: TestsetReply, description: 'The test set' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      return testsetReply(await testsets.get(projectId, param(request, 'testset_id')));
    },
  );

  app.put(
    '/api/simple/testsets/:testset_id',
    documented({
      summary: 'Commit a new revision of a test set with the rows as they now are (rows sent with their id keep it)',
      role: 'editor',
      errors: ['not-found'],
      body: TestsetEdit,
      ok: { status: 200, schema: TestsetReply, description: 'The test set at its new revision' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const { testset } = parseWith(TestsetEdit, request.body);
      return testsetReply(await testsets.edit(projectId, param(request, 'testset_id'), testset));
    },
  );

  app.post(
    '/api/simple/evaluations/',
    documented({
      summary: 'Create an evaluation run and start it: one application revision over one test set revision, repeats, concurrency, evaluators',
      role: 'editor',
      errors: [...TEMPLATE_ERRORS, ...EMBED_ERRORS],
      body: EvaluationCreate,
      ok: { status: 200, schema: EvaluationReply, description: 'The run; its status is at data.status' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const { evaluation } = parseWith(EvaluationCreate, request.body);
      return evaluationReply(await runs.create(projectId, evaluation));
    },
  );

  app.get(
    '/api/simple/evaluations/',
    documented({
      summary: "List the project's evaluation runs, newest first",
      role: 'viewer',
      query: paging('Runs'),
      ok: { status: 200, schema: EvaluationList, description: 'One page of runs' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const page = await runs.list(projectId, pageQuery(request));
      return { count: page.items.length, evaluations: page.items, ...(page.next ? { next: page.next } : {}) };
    },
  );

  app.get(
    '/api/simple/evaluations/:evaluation_id',
    documented({
      summary: 'Read a run: data.status and data.progress',
      role: 'viewer',
      errors: ['not-found'],
      ok: { status: 200, schema: EvaluationReply, description: 'The run' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      return evaluationReply(await runs.get(projectId, param(request, 'evaluation_id')));
    },
  );

  // The reference's SDK reads a run here, its status at `run.status`.
  app.get(
    '/api/evaluations/runs/:run_id',
    documented({
      summary: "Read an evaluation run as the reference's SDK does, its status at run.status",
      role: 'viewer',
      errors: ['not-found'],
      ok: { status: 200, schema: RunReply, description: 'The run' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const run = await runs.get(projectId, param(request, 'run_id'));
      return { count: 1, run: { ...run, status: run.data.status } };
    },
  );

  app.post(
    '/api/simple/evaluations/:evaluation_id/stop',
    documented(
      {
        summary: 'Stop a running run: cases in flight are cancelled, the rest never start; the run ends cancelled (a run that already ended stays as it is)',
        role: 'editor',
        errors: ['not-found'],
        ok: { status: 200, schema: EvaluationReply, description: 'The run: cancelled, or as it ended' },
      },
      { optionalBody: true },
    ),
    async (request) => {
      const { projectId } = await authorize(store, request);
      return evaluationReply(await runs.stop(projectId, param(request, 'evaluation_id')));
    },
  );

  app.post(
    '/api/simple/evaluations/:evaluation_id/rerun-failed',
    documented(
      {
        summary: 'Run the failed and cancelled cases of an ended run again (fresh retry budget) and merge their results; resumes a stopped run',
        role: 'editor',
        errors: ['not-found', 'conflict'],
        ok: { status: 200, schema: EvaluationReply, description: 'The run, running again' },
      },
      { optionalBody: true },
    ),
    async (request) => {
      const { projectId } = await authorize(store, request);
      return evaluationReply(await runs.rerunFailed(projectId, param(request, 'evaluation_id')));
    },
  );

  // Every filter is optional: no body reads every result, whatever the Content-Type says.
  app.post(
    '/api/evaluations/results/query',
    documented(
      {
        summary: 'Per-case results: status, outputs, error, duration, tokens, cost, scores, trace id and every attempt',
        role: 'viewer',
        errors: ['not-found'],
        body: ResultsQuery,
        ok: { status: 200, schema: ResultList, description: 'One page of results, in case order' },
      },
      { optionalBody: true },
    ),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const page = await runs.results(projectId, parseWith(ResultsQuery, request.body));
      return { count: page.items.length, results: page.items, ...(page.next ? { next: page.next } : {}) };
    },
  );

  app.post(
    '/api/evaluations/metrics/query',
    documented({
      summary: "A run's metrics (and per test case across repeats): count, sum, mean, min, max, stddev, p50, p90, p95, p99",
      role: 'viewer',
      errors: ['not-found'],
      body: MetricsQuery,
      ok: { status: 200, schema: MetricsList, description: 'Metrics records' },
    }),
    async (request) => {
      const { projectId } = await authorize(store, request);
      const { metrics: query, windowing } = parseWith(MetricsQuery, request.body);
      const runIds = allOf(query.run_id, query.run_ids) ?? [];
      if (runIds.length === 0) throw new AppError('invalid-request', 'metrics.run_id or metrics.run_ids must name the runs whose metrics to read');
      const perCase = query.scenario_id === undefined ? (query.scenario_ids ?? false) : [query.scenario_id, ...(Array.isArray(query.scenario_ids) ? query.scenario_ids : [])];
      const statuses = allOf(query.status, query.statuses);
      const found = await runs.metrics(projectId, runIds, perCase);
      const metrics = found.filter((m) => !statuses || statuses.includes(m.status)).slice(0, windowing?.limit);
      return { count: metrics.length, metrics };
    },
  );
}
