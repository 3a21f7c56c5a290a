import { parseTemplate } from '../agent/template.ts';
import type { Config } from '../config.ts';
import {
  EvaluatorSpec,
  type EvaluationCreate,
  type EvaluationResult,
  type EvaluationView,
  type MetricsRecord,
  type ResultsQuery,
  type Testcase,
} from '../contract/evaluations.ts';
import { resolveReferences } from '../configs/references.ts';
import { resolveRunConfig } from '../configs/run-config.ts';
import { describeIssue } from '../contract/zod-errors.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { allOf, optional } from '../objects.ts';
import { checkAnswerable, inboundMessages } from '../sessions/inbound.ts';
import type { Page, PageRequest } from '../store/cursor.ts';
import type { Store } from '../store/db.ts';
import type { Progress, ResultRecord } from '../store/evaluations.ts';
import type { EvaluationEngine, EvaluationRun, EvaluationSpec, PreparedRun } from './engine.ts';
import { checkEvaluators, names } from './evaluators.ts';
import { runMetrics } from './metrics.ts';
import type { TestsetService } from './testsets.ts';

type StepMap = string[] | Record<string, string>;

/** A bare list means origin `custom`, as in the reference. */
const normalizeSteps = (steps: StepMap): Record<string, string> => (Array.isArray(steps) ? Object.fromEntries(steps.map((id) => [id, 'custom'])) : steps);

function exactlyOne(steps: Record<string, string>, field: string, what: string): string {
  const ids = Object.keys(steps);
  if (ids.length !== 1) {
    throw new AppError('invalid-request', `evaluation.data.${field} must name exactly one ${what} revision, got ${ids.length}; run one evaluation per ${what}`);
  }
  return ids[0]!;
}

function toEvaluationView(run: EvaluationRun, progress: Progress): EvaluationView {
  const { spec } = run;
  return {
    id: run.id,
    ...optional('name', run.name),
    ...optional('description', run.description),
    ...optional('tags', run.tags),
    ...optional('meta', run.meta),
    ...optional('flags', run.flags),
    created_at: run.created_at,
    updated_at: run.updated_at,
    data: {
      status: run.status,
      testset_steps: spec.testset_steps,
      application_steps: spec.application_steps,
      ...(spec.evaluator_steps ? { evaluator_steps: spec.evaluator_steps } : {}),
      ...(spec.evaluators.length ? { evaluators: spec.evaluators.map((e) => ({ ...e.spec, name: e.name })) } : {}),
      repeats: spec.repeats,
      concurrency: spec.concurrency,
      progress,
      ...optional('started_at', run.started_at),
      ...optional('ended_at', run.ended_at),
      ...(run.error ? { error: run.error } : {}),
    },
  };
}

function toResultView(result: ResultRecord, stepKey: string, testcase?: Testcase): EvaluationResult {
  return {
    id: result.id,
    run_id: result.run_id,
    testcase_id: result.testcase_id,
    ...(testcase ? { testcase: { id: testcase.id, data: testcase.data } } : {}),
    scenario_id: result.testcase_id,
    repeat_idx: result.repeat_idx,
    step_key: stepKey,
    status: result.status,
    ...optional('trace_id', result.trace_id),
    ...optional('session_id', result.session_id),
    ...optional('outputs', result.output),
    ...optional('error', result.error),
    ...optional('duration_ms', result.duration_ms),
    ...optional('tokens', result.tokens),
    ...optional('cost', result.cost),
    ...optional('scores', result.scores),
    attempts: result.attempts,
    created_at: result.created_at,
    updated_at: result.updated_at,
  };
}

export interface RunServiceDeps {
  store: Store;
  config: Pick<Config, 'defaultLlm'>;
  testsets: TestsetService;
}

/**
 * Evaluation runs as the `/api` surface sees them: creating one checks everything a run needs
 * (one application revision that can run, the test set, the evaluators) so a run that is accepted
 * starts; the engine then runs it.
 */
export class RunService {
  private readonly deps: RunServiceDeps;
  private engine!: EvaluationEngine;

  constructor(deps: RunServiceDeps) {
    this.deps = deps;
  }

  /** The engine and this service need each other: the engine prepares runs through `prepare`. */
  attach(engine: EvaluationEngine): void {
    this.engine = engine;
  }

  private async template(projectId: string, revisionId: string) {
    const config = await resolveRunConfig(this.deps.store.configs, projectId, { references: { workflow_revision: { id: revisionId } }, resolveEmbeds: true });
    return parseTemplate(config.agent, this.deps.config.defaultLlm);
  }

  private async evaluatorsOf(projectId: string, steps: Record<string, string>): Promise<EvaluatorSpec[]> {
    const specs: EvaluatorSpec[] = [];
    for (const id of Object.keys(steps)) {
      const revision = await this.deps.store.configs.findRevision(projectId, 'workflow', { id });
      if (!revision || revision.artifact.family !== 'evaluator') {
        throw new AppError('unknown-reference', `evaluation.data.evaluator_steps names ${id}, which is not an evaluator revision of this project`);
      }
      const parsed = EvaluatorSpec.safeParse((revision.data.parameters as { evaluator?: unknown } | undefined)?.evaluator);
      if (!parsed.success) {
        throw new AppError('invalid-request', `evaluator revision ${id} ("${revision.artifact.slug}") has no valid built-in evaluator: ${describeIssue('data.parameters.evaluator', parsed.error.issues[0]!)}`);
      }
      specs.push({ ...parsed.data, name: parsed.data.name ?? revision.artifact.slug });
    }
    return specs;
  }

  async create(projectId: string, input: EvaluationCreate['evaluation']): Promise<EvaluationView> {
    const { store, testsets } = this.deps;
    const data = input.data;
    const applicationSteps = normalizeSteps(data.application_steps);
    const testsetSteps = normalizeSteps(data.testset_steps);
    const applicationId = exactlyOne(applicationSteps, 'application_steps', 'application');
    const testsetId = exactlyOne(testsetSteps, 'testset_steps', 'test set');

    // Through reference resolution, so the built-in agent's id (inspect's revision.id) runs too.
    const application = (await resolveReferences(store.configs, projectId, { workflow_revision: { id: applicationId } }).catch((error: unknown) => {
      if (error instanceof AppError && error.type === 'unknown-reference') {
        throw new AppError('unknown-reference', `evaluation.data.application_steps names ${applicationId}, which is no workflow revision of this project`);
      }
      throw error;
    }))!;
    await this.template(projectId, application.id);
    const rows = await testsets.rows(projectId, testsetId);
    if (!rows) throw new AppError('unknown-reference', `evaluation.data.testset_steps names ${testsetId}, which is no test set revision of this project`);

    const evaluatorSteps = data.evaluator_steps ? normalizeSteps(data.evaluator_steps) : undefined;
    const evaluators = [...(evaluatorSteps ? await this.evaluatorsOf(projectId, evaluatorSteps) : []), ...(data.evaluators ?? [])];
    checkEvaluators(evaluators);
    const evaluatorNames = names(evaluators);

    const spec: EvaluationSpec = {
      testset: { id: rows.revision.artifact.id, slug: rows.revision.artifact.slug, revision_id: rows.revision.id, version: rows.revision.version },
      application: {
        revision_id: application.id,
        workflow_id: application.artifact.id,
        workflow_slug: application.artifact.slug,
        version: application.version,
        step_key: `application-${application.artifact.slug}`,
      },
      testset_steps: { [rows.revision.id]: testsetSteps[testsetId]! },
      application_steps: applicationSteps,
      ...(evaluatorSteps ? { evaluator_steps: evaluatorSteps } : {}),
      evaluators: evaluators.map((evaluator, i) => ({ name: evaluatorNames[i]!, spec: evaluator })),
      repeats: data.repeats,
      concurrency: data.concurrency,
    };
    const id = newId();
    // Ids number the cases, repeat by repeat, so cases run (and list) in test set order.
    const cases = Array.from({ length: data.repeats }, (_, repeat) => rows.testcases.map((testcase) => ({ testcase_id: testcase.id, repeat_idx: repeat }))).flat();
    await store.evaluations.createRun(
      { id, project_id: projectId, name: input.name, description: input.description, spec, tags: input.tags, meta: input.meta, flags: input.flags },
      cases.map((c, i) => ({ ...c, id: `${id}.${String(i).padStart(6, '0')}` })),
    );
    const run = (await store.evaluations.getRun<EvaluationSpec>(projectId, id))!;
    this.engine.start(run);
    return toEvaluationView(run, await store.evaluations.progress(id));
  }

  /** What the engine runs a run's cases with. */
  async prepare(run: EvaluationRun): Promise<PreparedRun> {
    const template = await this.template(run.project_id, run.spec.application.revision_id);
    const rows = await this.deps.testsets.rows(run.project_id, run.spec.testset.revision_id);
    if (!rows) throw new AppError('unknown-reference', `the run's test set revision ${run.spec.testset.revision_id} no longer exists`);
    const conversations: PreparedRun['conversations'] = new Map();
    const testcases: PreparedRun['testcases'] = new Map();
    for (const testcase of rows.testcases) {
      testcases.set(testcase.id, testcase.data);
      try {
        // Only `messages` reaches the agent (spec §4.5.2): the same rule as invoke's data.testcase.
        const conversation = inboundMessages({ data: { testcase: { id: testcase.id, data: testcase.data } } }, 'native');
        if (!conversation?.messages.length) throw new AppError('invalid-messages', `test case ${testcase.id} has no messages: give it a "messages" column`);
        checkAnswerable(conversation.messages, `test case ${testcase.id}`);
        conversations.set(testcase.id, conversation);
      } catch (error) {
        conversations.set(testcase.id, error as AppError);
      }
    }
    return { template, conversations, testcases };
  }

  private async run(projectId: string, id: string): Promise<EvaluationRun> {
    const run = await this.deps.store.evaluations.getRun<EvaluationSpec>(projectId, id);
    if (!run) throw new AppError('not-found', `this project has no evaluation run "${id}"`);
    return run;
  }

  /** Every run of the project, newest first. */
  private async allRuns(projectId: string): Promise<EvaluationRun[]> {
    const all: EvaluationRun[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.deps.store.evaluations.listRuns<EvaluationSpec>(projectId, { limit: 200, cursor });
      all.push(...page.items);
      cursor = page.next;
    } while (cursor);
    return all;
  }

  async get(projectId: string, id: string): Promise<EvaluationView> {
    const run = await this.run(projectId, id);
    return toEvaluationView(run, await this.deps.store.evaluations.progress(id));
  }

  async list(projectId: string, page: PageRequest): Promise<Page<EvaluationView>> {
    const found = await this.deps.store.evaluations.listRuns<EvaluationSpec>(projectId, page);
    const items = await Promise.all(found.items.map(async (run) => toEvaluationView(run, await this.deps.store.evaluations.progress(run.id))));
    return { items, ...(found.next ? { next: found.next } : {}) };
  }

  async stop(projectId: string, id: string): Promise<EvaluationView> {
    const run = await this.run(projectId, id);
    // Stopping is idempotent: a run that ended (perhaps while the request was on its way) is
    // answered as it is, so a caller racing a fast run needs no special case.
    if (run.status === 'pending' || run.status === 'running') await this.engine.stop(run);
    return this.get(projectId, id);
  }

  /** Runs the failed cases of an ended run again, with a fresh retry budget; the others stay as they are. */
  async rerunFailed(projectId: string, id: string): Promise<EvaluationView> {
    const { store } = this.deps;
    const run = await this.run(projectId, id);
    if (run.status === 'pending' || run.status === 'running') {
      throw new AppError('conflict', `evaluation run ${id} is still ${run.status}; rerun its failed cases once it has ended`);
    }
    // A stopped run's cancelled cases never ran to an outcome: running them again is how it resumes.
    const moved = (await store.evaluations.moveResults(id, 'failure', 'pending')) + (await store.evaluations.moveResults(id, 'cancelled', 'pending'));
    if (moved === 0) throw new AppError('conflict', `evaluation run ${id} has no failed or cancelled cases to run again`);
    const startedAt = new Date().toISOString();
    await store.evaluations.updateRun(id, { status: 'running', started_at: startedAt, ended_at: null, error: null, metrics: null, cancel_requested: false });
    this.engine.start({ ...run, status: 'running', started_at: startedAt, ended_at: null });
    return this.get(projectId, id);
  }

  async results(projectId: string, query: ResultsQuery): Promise<Page<EvaluationResult>> {
    const { store } = this.deps;
    const filter = query.result;
    const named = allOf(filter.run_id, filter.run_ids);
    // A run of another project, or one that does not exist, is a 404 here as on every route that names it.
    const namedRuns: EvaluationRun[] = [];
    for (const runId of named ?? []) namedRuns.push(await this.run(projectId, runId));
    const stepKeys = allOf(filter.step_key, filter.step_keys);
    // A run has one step key, so that filter picks runs before the page is read: every page comes
    // out full, and a step key no run has is an empty answer with no `next` to follow.
    const runIds = stepKeys ? (named ? namedRuns : await this.allRuns(projectId)).filter((run) => stepKeys.includes(run.spec.application.step_key)).map((run) => run.id) : named;
    if (runIds?.length === 0) return { items: [] };
    const testcaseIds = allOf(filter.testcase_id, filter.testcase_ids) ?? [];
    const scenarioIds = allOf(filter.scenario_id, filter.scenario_ids) ?? [];
    const repeatIdxs = allOf(filter.repeat_idx, filter.repeat_idxs);
    const statuses = allOf(filter.status, filter.statuses);
    const page = await store.evaluations.queryResults(
      projectId,
      {
        ...(runIds ? { run_ids: runIds } : {}),
        ...(filter.ids ? { ids: filter.ids } : {}),
        ...(testcaseIds.length + scenarioIds.length > 0 ? { testcase_ids: [...testcaseIds, ...scenarioIds] } : {}),
        ...(repeatIdxs ? { repeat_idxs: repeatIdxs } : {}),
        ...(statuses ? { statuses } : {}),
      },
      { limit: query.windowing?.limit ?? 100, cursor: query.windowing?.cursor ?? query.windowing?.next },
    );
    // Each result names its run's application step and carries its test case, so a failing case
    // reads without a second lookup; runs and their test set rows are read once per page.
    const runs = new Map<string, { stepKey: string; testcases: Map<string, Testcase> }>();
    for (const runId of new Set(page.items.map((r) => r.run_id))) {
      const { spec } = await this.run(projectId, runId);
      const rows = await this.deps.testsets.rows(projectId, spec.testset.revision_id);
      runs.set(runId, { stepKey: spec.application.step_key, testcases: new Map((rows?.testcases ?? []).map((row) => [row.id, row])) });
    }
    return {
      items: page.items.map((r) => {
        const run = runs.get(r.run_id)!;
        return toResultView(r, run.stepKey, run.testcases.get(r.testcase_id));
      }),
      ...(page.next ? { next: page.next } : {}),
    };
  }

  /** Stored metrics for an ended run; computed from its results while it runs, or per test case. */
  async metrics(projectId: string, runIds: string[], perCase: boolean | string[]): Promise<MetricsRecord[]> {
    const records: MetricsRecord[] = [];
    for (const id of runIds) {
      const run = await this.run(projectId, id);
      if (run.metrics && perCase === false) records.push(...run.metrics);
      else records.push(...runMetrics(run, await this.deps.store.evaluations.resultsOf(id), perCase));
    }
    return records;
  }
}
