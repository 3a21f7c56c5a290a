import { expect } from 'vitest';
import { okJsonText, type Harness } from '../support/harness.ts';
import { configsApi } from '../configs/client.ts';

/** The evaluation routes as the evaluation tests call them: each reply checked like any /api reply. */

export async function createTestset(h: Harness, testset: Record<string, unknown>): Promise<any> {
  const { body } = await okJsonText(await configsApi(h, 'POST', '/simple/testsets/', { testset }));
  expect(body.count).toBe(1);
  // Spec §4.5: the creation's response carries `revision_id`; at the top as on the test set.
  expect(body.revision_id).toBe(body.testset.revision_id);
  return body.testset;
}

/** Creates (and so starts) a run over one test set revision with one application revision. */
export function postRun(h: Harness, testsetStep: string, appRevision: string, data: Record<string, unknown> = {}, name = 'run'): Promise<Response> {
  return configsApi(h, 'POST', '/simple/evaluations/', { evaluation: { name, data: { testset_steps: [testsetStep], application_steps: [appRevision], ...data } } });
}

export async function startRun(h: Harness, testsetStep: string, appRevision: string, data: Record<string, unknown> = {}, name = 'run'): Promise<any> {
  return theRun((await okJsonText(await postRun(h, testsetStep, appRevision, data, name))).body);
}

/** A reply's run. Spec §4.5 reads a run's status at `data.status`: the run's data is at the top too. */
function theRun(body: { evaluation: { data: unknown }; data: unknown }): any {
  expect(body.data).toEqual(body.evaluation.data);
  return body.evaluation;
}

/** The run once it has ended (polled). */
export async function runEnded(h: Harness, id: string): Promise<any> {
  for (;;) {
    const { body } = await okJsonText(await configsApi(h, 'GET', `/simple/evaluations/${id}`));
    if (!['pending', 'running'].includes(body.data.status)) return theRun(body);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export async function runResults(h: Harness, runId: string, filter: Record<string, unknown> = {}): Promise<any[]> {
  const { body } = await okJsonText(await configsApi(h, 'POST', '/evaluations/results/query', { result: { run_id: runId, ...filter }, windowing: { limit: 200 } }));
  return body.results;
}

/** The run's own metrics record. */
export async function runMetricsRecord(h: Harness, runId: string): Promise<any> {
  const { body } = await okJsonText(await configsApi(h, 'POST', '/evaluations/metrics/query', { metrics: { run_id: runId } }));
  expect(body.count).toBe(1);
  return body.metrics[0];
}

export const finalText = (result: any) => result.outputs?.messages?.at(-1)?.content;
