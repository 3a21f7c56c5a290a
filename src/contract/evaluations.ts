import { z } from 'zod';
import { ConfigSlug } from './configs.ts';
import { withExample } from './example.ts';
import { Paging } from './interactions.ts';
import { RUN_LIMITS } from './evaluation-limits.ts';

/**
 * Test sets, evaluation runs, their results and metrics (spec §2.8, §3.3, §4.5; reference §7 for
 * the shapes the reference's clients send and read).
 */

const record = z.record(z.string(), z.unknown());

// ---------------------------------------------------------------- test sets

/** A row's own labels, as the reference's test cases carry them; they never reach the agent. */
const TestcaseLabels = { tags: record.optional(), meta: record.optional(), flags: record.optional() };

const TestcaseInput = z.strictObject({
  /** Keeps a row's identity across revisions of the test set; new rows get one. */
  id: z.string().min(1).max(128).optional(),
  data: record,
  ...TestcaseLabels,
});

export const MAX_TESTCASES = 10_000;

const TestsetFields = {
  name: z.string().min(1).max(256).optional(),
  description: z.string().max(4096).optional(),
  tags: record.optional(),
  meta: record.optional(),
  flags: record.optional(),
};

/** Rows as the examples write them: the conversation a case starts with, and what the answer should hold. */
const EXAMPLE_TESTCASES = [
  { data: { messages: [{ role: 'user', content: 'How do I reset my password?' }], expected: 'Settings' } },
  { data: { messages: [{ role: 'user', content: 'Can I pay by invoice?' }], expected: 'invoice' } },
];

export const TestsetCreate = withExample(
  z.strictObject({
    testset: z.strictObject({
      slug: ConfigSlug.optional(),
      ...TestsetFields,
      data: z.strictObject({ testcases: z.array(TestcaseInput).min(1).max(MAX_TESTCASES) }),
    }),
  }),
  { testset: { slug: 'support-questions', name: 'Support questions', data: { testcases: EXAMPLE_TESTCASES } } },
);
export type TestsetCreate = z.infer<typeof TestsetCreate>;

/** A new revision: the rows as they now are (rows sent with their `id` keep it). */
export const TestsetEdit = withExample(
  z.strictObject({
    testset: z.strictObject({
      ...TestsetFields,
      data: z.strictObject({ testcases: z.array(TestcaseInput).min(1).max(MAX_TESTCASES) }),
      message: z.string().max(4096).optional(),
    }),
  }),
  {
    testset: {
      data: { testcases: [...EXAMPLE_TESTCASES, { data: { messages: [{ role: 'user', content: 'Where is my order?' }], expected: 'tracking' } }] },
      message: 'One more question',
    },
  },
);
export type TestsetEdit = z.infer<typeof TestsetEdit>;

export const Testcase = z.object({ id: z.string(), data: record, ...TestcaseLabels });
export type Testcase = z.infer<typeof Testcase>;

export const TestsetView = z.object({
  id: z.string(),
  slug: z.string(),
  name: z.string().optional(),
  description: z.string().optional(),
  tags: record.optional(),
  meta: record.optional(),
  flags: record.optional(),
  revision_id: z.string(),
  variant_id: z.string(),
  version: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
  data: z.object({ testcase_ids: z.array(z.string()), testcases: z.array(Testcase).optional() }),
});
export type TestsetView = z.infer<typeof TestsetView>;

/**
 * The reference's test set query: every attribute given in `testset` must match, `testset_refs`
 * keeps the test sets named (by id or slug). Without `windowing.limit` every match comes back; with
 * it, one page, and the reply's `next` passed back as `windowing.next` reads the following one.
 */
export const TestsetQuery = withExample(
  z.strictObject({
    testset: z
      .strictObject({ name: z.string().optional(), slug: z.string().optional(), tags: record.optional(), meta: record.optional(), flags: record.optional() })
      .optional(),
    testset_refs: z.array(z.strictObject({ id: z.string().min(1).optional(), slug: z.string().min(1).optional(), version: z.union([z.string(), z.number()]).optional() })).optional(),
    /** Nothing is archived here: with or without, every test set is listed. */
    include_archived: z.boolean().optional(),
    windowing: z.strictObject({ ...Paging, next: Paging.cursor }).optional(),
  }),
  { testset: { name: 'Support questions' }, windowing: { limit: 10 } },
);
export type TestsetQuery = z.infer<typeof TestsetQuery>;

/** `revision_id` also at the top: spec §4.5 says the creation's response carries it. */
export const TestsetReply = z.object({ count: z.number().int(), revision_id: z.string(), testset: TestsetView });
export const TestsetList = z.object({ count: z.number().int(), testsets: z.array(TestsetView), next: z.string().optional() });

// ---------------------------------------------------------------- evaluators

const evaluatorName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'an evaluator name is 1-64 letters, digits, "_" or "-"');
/** The test case column holding what the output is compared with. */
const column = z.string().min(1).max(128);

export const EvaluatorSpec = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('exact_match'), name: evaluatorName.optional(), column: column.default('expected'), case_sensitive: z.boolean().default(true) }),
  z
    .strictObject({ kind: z.literal('contains'), name: evaluatorName.optional(), column: column.optional(), value: z.string().min(1).optional(), case_sensitive: z.boolean().default(false) })
    .refine((s) => (s.column === undefined) !== (s.value === undefined), { message: 'contains needs exactly one of column (a test case column) or value (a fixed text)' })
    .meta({ oneOf: [{ required: ['column'] }, { required: ['value'] }] }),
  z.strictObject({
    kind: z.literal('regex'),
    name: evaluatorName.optional(),
    pattern: z.string().min(1).max(1024),
    // RegExp refuses a flag given twice; the pattern says so, so the document does too.
    flags: z.string().regex(/^(?!.*(.).*\1)[imsu]*$/, { message: 'flags are some of i, m, s and u, each at most once' }).optional(),
  }),
  z.strictObject({ kind: z.literal('json_valid'), name: evaluatorName.optional() }),
  z.strictObject({
    kind: z.literal('llm_judge'),
    name: evaluatorName.optional(),
    rubric: z.string().min(1).max(20_000),
    llm: z.strictObject({ provider: z.string().optional(), model: z.string().optional() }).optional(),
    /** Scores at or above it pass. */
    threshold: z.number().min(0).max(1).default(0.5),
    /** A reference answer the judge may compare with. */
    column: column.optional(),
  }),
]);
export type EvaluatorSpec = z.infer<typeof EvaluatorSpec>;

const EVALUATOR_KINDS = ['exact_match', 'contains', 'regex', 'json_valid', 'llm_judge'] as const;

/** One evaluator's verdict on one result. `score` is 0..1; `error` when the evaluator itself failed. */
export const EvaluatorScore = z.object({
  name: z.string(),
  kind: z.enum(EVALUATOR_KINDS),
  score: z.number().min(0).max(1).optional(),
  pass: z.boolean().optional(),
  reason: z.string().optional(),
  error: z.string().optional(),
});
export type EvaluatorScore = z.infer<typeof EvaluatorScore>;

// ---------------------------------------------------------------- runs

/** A case's repeat, counted from 0; bounded so that a filter never overflows the database's integer column. */
const RepeatIdx = z.number().int().min(0).max(RUN_LIMITS.repeats - 1);

/**
 * A list of revision ids, or a map of revision id to origin, as the reference accepts: its three
 * origins only, so a misspelt one is told rather than stored (every step runs the same way here).
 */
const StepMap = z.union([z.array(z.string().min(1)), z.record(z.string().min(1), z.enum(['auto', 'human', 'custom']))], {
  error: 'give a list of revision ids, or a map of revision id to origin ("auto", "human" or "custom")',
});

const Concurrency = z.strictObject({
  batch_size: z.number().int().min(1).max(RUN_LIMITS.batchSize).default(10),
  max_retries: z.number().int().min(0).max(RUN_LIMITS.maxRetries).default(0),
  /** Whole seconds between attempts of a case (spec §8). */
  retry_delay: z.number().int().min(0).max(RUN_LIMITS.retryDelayS).default(0),
});

export const EvaluationCreate = withExample(
  z.strictObject({
    evaluation: z.strictObject({
      name: z.string().min(1).max(256).optional(),
      description: z.string().max(4096).optional(),
      tags: record.optional(),
      meta: record.optional(),
      flags: record.optional(),
      data: z.strictObject({
        status: z.string().optional(),
        query_steps: StepMap.optional(),
        testset_steps: StepMap,
        application_steps: StepMap,
        evaluator_steps: StepMap.optional(),
        evaluators: z.array(EvaluatorSpec).max(20).optional(),
        repeats: z.number().int().min(1).max(RUN_LIMITS.repeats).default(1),
        concurrency: Concurrency.default({ batch_size: 10, max_retries: 0, retry_delay: 0 }),
      }),
    }),
  }),
  {
    evaluation: {
      name: 'Support bot, nightly',
      data: {
        testset_steps: ['<test set revision id>'],
        application_steps: ['<application revision id>'],
        evaluators: [{ kind: 'contains', column: 'expected' }],
        repeats: 1,
        concurrency: { batch_size: 4, max_retries: 1 },
      },
    },
  },
);
export type EvaluationCreate = z.infer<typeof EvaluationCreate>;

const RUN_STATUSES = ['pending', 'running', 'success', 'errors', 'failure', 'cancelled'] as const;
export const RunStatus = z.enum(RUN_STATUSES);
export type RunStatus = z.infer<typeof RunStatus>;

const RESULT_STATUSES = ['pending', 'running', 'success', 'failure', 'cancelled'] as const;
export const ResultStatus = z.enum(RESULT_STATUSES);
export type ResultStatus = z.infer<typeof ResultStatus>;

const Progress = z.object({
  total: z.number().int(),
  pending: z.number().int(),
  running: z.number().int(),
  success: z.number().int(),
  failure: z.number().int(),
  cancelled: z.number().int(),
});

export const EvaluationView = z.object({
  id: z.string(),
  name: z.string().optional(),
  description: z.string().optional(),
  tags: record.optional(),
  meta: record.optional(),
  flags: record.optional(),
  created_at: z.string(),
  updated_at: z.string(),
  data: z.object({
    status: RunStatus,
    testset_steps: z.record(z.string(), z.string()),
    application_steps: z.record(z.string(), z.string()),
    evaluator_steps: z.record(z.string(), z.string()).optional(),
    evaluators: z.array(EvaluatorSpec).optional(),
    repeats: z.number().int(),
    concurrency: z.object({ batch_size: z.number().int(), max_retries: z.number().int(), retry_delay: z.number() }),
    progress: Progress,
    started_at: z.string().optional(),
    ended_at: z.string().optional(),
    /** Why a run ended `failure`. */
    error: z.object({ type: z.string().optional(), message: z.string() }).optional(),
  }),
});
export type EvaluationView = z.infer<typeof EvaluationView>;

/** The run's `data` also at the top: spec §4.5 reads a run's status at `data.status`, the reference at `evaluation.data.status`. */
export const EvaluationReply = z.object({ count: z.number().int(), evaluation: EvaluationView, data: EvaluationView.shape.data });
/** A run as the reference's run routes answer it: `run.status` beside `run.data.status`. */
export const RunReply = z.object({ count: z.number().int(), run: EvaluationView.extend({ status: RunStatus }) });
export const EvaluationList = z.object({ count: z.number().int(), evaluations: z.array(EvaluationView), next: z.string().optional() });

export const Attempt = z.object({
  attempt: z.number().int(),
  /** `interrupted`: the process running it stopped (a crash, a replica lost) and the case ran again. */
  status: z.enum(['success', 'failure', 'cancelled', 'interrupted']),
  started_at: z.string(),
  duration_ms: z.number(),
  trace_id: z.string().optional(),
  error: z.object({ code: z.number().int().optional(), type: z.string().optional(), message: z.string() }).optional(),
});
export type Attempt = z.infer<typeof Attempt>;

export const EvaluationResult = z.object({
  id: z.string(),
  run_id: z.string(),
  testcase_id: z.string(),
  scenario_id: z.string().describe('The reference calls a test case of a run a scenario; equal to testcase_id'),
  /** The test case this result ran: its inputs and expected values, as the test set revision holds them. */
  testcase: z.object({ id: z.string(), data: record }).optional(),
  repeat_idx: z.number().int(),
  step_key: z.string(),
  status: ResultStatus,
  trace_id: z.string().optional(),
  session_id: z.string().optional(),
  outputs: z.object({ messages: z.array(z.unknown()), stop_reason: z.string().optional() }).optional(),
  error: z.object({ code: z.number().int().optional(), type: z.string().optional(), message: z.string() }).optional(),
  duration_ms: z.number().optional(),
  tokens: z.number().optional(),
  cost: z.number().optional(),
  scores: z.array(EvaluatorScore).optional(),
  attempts: z.array(Attempt),
  created_at: z.string(),
  updated_at: z.string(),
});
export type EvaluationResult = z.infer<typeof EvaluationResult>;

const oneOrMany = <T extends z.ZodType>(schema: T) => z.union([schema, z.array(schema).min(1)]);

/** The reference's windowing: `next` is our cursor. */
const Windowing = z.strictObject({ ...Paging, next: Paging.cursor });

/** Each filter in the singular or, as the reference also names them, the plural (`statuses`, `scenario_ids`, …). */
export const ResultsQuery = withExample(
  z.strictObject({
    result: z
      .strictObject({
        run_id: z.string().optional(),
        run_ids: z.array(z.string()).min(1).optional(),
        ids: z.array(z.string()).min(1).optional(),
        testcase_id: oneOrMany(z.string()).optional(),
        testcase_ids: z.array(z.string()).min(1).optional(),
        scenario_id: oneOrMany(z.string()).optional(),
        scenario_ids: z.array(z.string()).min(1).optional(),
        step_key: oneOrMany(z.string()).optional(),
        step_keys: z.array(z.string()).min(1).optional(),
        repeat_idx: oneOrMany(RepeatIdx).optional(),
        repeat_idxs: z.array(RepeatIdx).min(1).optional(),
        status: oneOrMany(ResultStatus).optional(),
        statuses: z.array(ResultStatus).min(1).optional(),
      })
      .default({}),
    windowing: Windowing.optional(),
  }),
  { result: { run_id: '<evaluation id>', status: 'failure' }, windowing: { limit: 20 } },
);
export type ResultsQuery = z.infer<typeof ResultsQuery>;

export const ResultList = z.object({ count: z.number().int(), results: z.array(EvaluationResult), next: z.string().optional() });

export const Stats = z.object({
  count: z.number().int(),
  sum: z.number().optional(),
  mean: z.number().optional(),
  min: z.number().optional(),
  max: z.number().optional(),
  stddev: z.number().optional(),
  p50: z.number().optional(),
  p90: z.number().optional(),
  p95: z.number().optional(),
  p99: z.number().optional(),
});
export type Stats = z.infer<typeof Stats>;

const MetricsFilter = z.strictObject({
  run_id: z.string().optional(),
  run_ids: z.array(z.string()).min(1).optional(),
  /** One test case's record (instead of the run's). */
  scenario_id: z.string().optional(),
  /** true: one record per test case (across its repeats) instead of the run's; or the test cases wanted. */
  scenario_ids: z.union([z.boolean(), z.array(z.string()).min(1)]).optional(),
  /** The reference's switch for records over time; none are kept here, so only `false` can be met. */
  timestamp: z.literal(false).optional(),
  timestamps: z.literal(false).optional(),
  status: oneOrMany(RunStatus).optional(),
  statuses: z.array(RunStatus).min(1).optional(),
})
  // The route needs the runs named (routes/evaluations.ts); the document says so.
  .meta({ anyOf: [{ required: ['run_id'] }, { required: ['run_ids'] }] });

/** The reference also takes the filter under `metric`. */
export const MetricsQuery = withExample(
  z
    .strictObject({
      metrics: MetricsFilter.optional(),
      metric: MetricsFilter.optional(),
      windowing: z.strictObject({ limit: Paging.limit }).optional(),
    })
    .transform(({ metric, metrics, windowing }, ctx) => {
      if ((metrics ?? metric) === undefined) {
        ctx.addIssue({ code: 'custom', path: ['metrics'], message: 'metrics must name the runs whose metrics to read' });
        return z.NEVER;
      }
      return { metrics: metrics ?? metric!, windowing };
    })
    .meta({ anyOf: [{ required: ['metrics'] }, { required: ['metric'] }] }),
  { metrics: { run_id: '<evaluation id>', scenario_ids: true } },
);

export const MetricsRecord = z.object({
  run_id: z.string(),
  scenario_id: z.string().optional(),
  status: RunStatus,
  /** Per step key (`application-<slug>`, `evaluator-<name>`): metric name → statistics. */
  data: z.record(z.string(), z.record(z.string(), Stats)),
});
export type MetricsRecord = z.infer<typeof MetricsRecord>;

export const MetricsList = z.object({ count: z.number().int(), metrics: z.array(MetricsRecord) });
