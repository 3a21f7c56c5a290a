import type { MetricsRecord, RunStatus, Stats } from '../contract/evaluations.ts';
import type { ResultRecord } from '../store/evaluations.ts';
import { summarize } from './stats.ts';

/**
 * A run's metrics, from its results. Each metric is summarized over the results that have it, so
 * a failed case adds to the error rate and its duration, and never blanks the statistics of the
 * cases that succeeded. `errors` and evaluator `pass` are 0/1 per case: their mean is the rate.
 */

interface RunLike {
  id: string;
  status: RunStatus;
  spec: { application: { step_key: string }; evaluators: { name: string }[] };
}

const finished = (r: ResultRecord) => r.status === 'success' || r.status === 'failure';

function summarizeResults(run: RunLike, results: readonly ResultRecord[]): MetricsRecord['data'] {
  const done = results.filter(finished);
  const of = (pick: (r: ResultRecord) => number | null | undefined): Stats => summarize(done.map(pick).filter((v): v is number => typeof v === 'number'));
  const data: MetricsRecord['data'] = {
    [run.spec.application.step_key]: {
      duration_ms: of((r) => r.duration_ms),
      tokens: of((r) => r.tokens),
      cost: of((r) => r.cost),
      errors: of((r) => (r.status === 'failure' ? 1 : 0)),
      attempts: of((r) => r.attempts.length),
    },
  };
  for (const { name } of run.spec.evaluators) {
    const scores = done.map((r) => r.scores?.find((s) => s.name === name)).filter((s) => s !== undefined);
    data[`evaluator-${name}`] = {
      score: summarize(scores.flatMap((s) => (s.score === undefined ? [] : [s.score]))),
      pass: summarize(scores.flatMap((s) => (s.pass === undefined ? [] : [s.pass ? 1 : 0]))),
      errors: summarize(scores.map((s) => (s.error === undefined ? 0 : 1))),
    };
  }
  return data;
}

/**
 * The run's record; or, when `perCase` asks for test cases (true for every case, or a list of the
 * test case ids wanted), one record per case across its repeats, and not the run's: the reference's
 * clients read every record of such a query as a case's.
 */
export function runMetrics(run: RunLike, results: readonly ResultRecord[], perCase: boolean | readonly string[]): MetricsRecord[] {
  if (perCase === false) return [{ run_id: run.id, status: run.status, data: summarizeResults(run, results) }];
  const records: MetricsRecord[] = [];
  const byCase = new Map<string, ResultRecord[]>();
  for (const result of results) {
    if (perCase !== true && !perCase.includes(result.testcase_id)) continue;
    byCase.set(result.testcase_id, [...(byCase.get(result.testcase_id) ?? []), result]);
  }
  for (const [testcaseId, caseResults] of byCase) {
    records.push({ run_id: run.id, scenario_id: testcaseId, status: run.status, data: summarizeResults(run, caseResults) });
  }
  return records;
}
