import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/testing/fake-model.ts';
import { expectError, okJsonText, startHarness, template, type Harness } from '../support/harness.ts';
import { configsApi, createWorkflow } from '../configs/client.ts';
import { createTestset, runEnded, runResults, startRun } from './client.ts';
import { startSilentMcpServer } from '../support/mcp-server.ts';

/**
 * Evaluation runs end to end (issue 5): the fake model fails some cases once, one always, and
 * rate-limits one with retry-after; counts, statuses, attempts and metrics must come out exact.
 */

let h: Harness;
let appRevision: string;
/** Model calls per user message, to script "fails first, then succeeds". */
const calls = new Map<string, number>();
/** Until set, "broken" cases fail on every attempt. */
let healed = false;
/** Until set, "slow" cases take a minute. */
let quick = false;

const userText = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';

function script(req: RecordedRequest) {
  const text = userText(req);
  const n = (calls.get(text) ?? 0) + 1;
  calls.set(text, n);
  if (text.startsWith('broken') && !healed) return { error: { status: 500, message: 'always down' } };
  if (text.startsWith('flaky') && n === 1) return { error: { status: 503, message: 'down once' } };
  if (text.startsWith('limited') && n === 1) return { error: { status: 429, headers: { 'retry-after': '1' }, message: 'slow down' } };
  if (text.startsWith('slow')) return { text: `answer to ${text}`, latencyMs: quick ? 20 : 60_000 };
  if (text.startsWith('keyless')) return { error: { status: 401, message: 'Incorrect API key provided' } };
  if (text.startsWith('too long')) return { error: { status: 400, message: 'context_length_exceeded' } };
  return { text: `answer to ${text}`, latencyMs: 20, usage: { input: 10, output: 5 } };
}

const api = (method: string, path: string, body?: unknown) => configsApi(h, method, path, body);
const row = (text: string, extra: Record<string, unknown> = {}) => ({ data: { messages: [{ role: 'user', content: text }], expected: `answer to ${text}`, ...extra } });

const testset = async (rows: unknown[]): Promise<string> => (await createTestset(h, { name: 'cases', data: { testcases: rows } })).revision_id;
const evaluate = (testsetRevision: string, data: Record<string, unknown> = {}) => startRun(h, testsetRevision, appRevision, data);
const ended = (id: string) => runEnded(h, id);
const results = (runId: string, filter: Record<string, unknown> = {}) => runResults(h, runId, filter);

beforeAll(async () => {
  h = await startHarness({ script });
  appRevision = (await createWorkflow(h, 'eval-target', { agent: template() })).revision.id;
});
afterAll(async () => h.close());

describe('evaluation runs', () => {
  it('runs every case and repeat, retrying failures, keeping every attempt, with exact counts and metrics', async () => {
    calls.clear();
    h.model.reset();
    const rows = [row('ok-1', { hidden_column: 'never-sent-1' }), row('ok-2'), row('flaky-1'), row('flaky-2'), row('broken-1'), row('limited-1'), row('ok-3'), row('ok-4')];
    const revision = await testset(rows);
    const created = await evaluate(revision, {
      repeats: 1,
      concurrency: { batch_size: 3, max_retries: 2, retry_delay: 0 },
      evaluators: [{ kind: 'exact_match' }, { kind: 'contains', value: 'ANSWER' }],
    });
    expect(created.data.progress.total).toBe(8);
    const run = await ended(created.id);
    expect(run.data.status).toBe('errors');
    expect(run.data.progress).toEqual({ total: 8, pending: 0, running: 0, success: 7, failure: 1, cancelled: 0 });

    const all = await results(run.id);
    expect(all).toHaveLength(8);
    const byText = Object.fromEntries(all.map((r) => [r.outputs?.messages?.at(-1)?.content ?? `failed ${r.testcase_id}`, r]));
    const broken = all.find((r) => r.status === 'failure');
    // Broken: the first try and two retries, each kept with its error.
    expect(broken.attempts.map((a: any) => a.status)).toEqual(['failure', 'failure', 'failure']);
    expect(broken.error).toMatchObject({ code: 502, type: 'upstream-error' });
    expect(calls.get('broken-1')).toBe(3);
    // Flaky: failed once, then succeeded.
    expect(byText['answer to flaky-1'].attempts.map((a: any) => a.status)).toEqual(['failure', 'success']);
    // Rate limited: the retry waited at least the provider's retry-after.
    const limited = byText['answer to limited-1'];
    expect(limited.attempts.map((a: any) => a.error?.code ?? a.status)).toEqual([429, 'success']);
    expect(Date.parse(limited.attempts[1].started_at) - Date.parse(limited.attempts[0].started_at)).toBeGreaterThanOrEqual(1000);
    // Each result carries its test case, inputs and expected values, so a failure reads in one lookup.
    const rowOf = Object.fromEntries(rows.map((r: any) => [r.data.messages[0].content, r]));
    expect(broken.testcase).toEqual({ id: broken.testcase_id, data: rowOf['broken-1'].data });
    expect(byText['answer to ok-1'].testcase.data.hidden_column).toBe('never-sent-1');
    // Evaluators scored every success.
    expect(byText['answer to ok-1'].scores).toEqual([
      { name: 'exact_match', kind: 'exact_match', score: 1, pass: true },
      expect.objectContaining({ name: 'contains', kind: 'contains', score: 1, pass: true }),
    ]);
    expect(byText['answer to ok-1'].tokens).toBe(15);

    // batch_size was never exceeded, and only `messages` reached the model.
    expect(h.model.peakInFlight).toBeLessThanOrEqual(3);
    expect(JSON.stringify(h.model.requests)).not.toContain('never-sent-1');

    const { body } = await okJsonText(await api('POST', '/evaluations/metrics/query', { metrics: { run_id: run.id } }));
    expect(body.count).toBe(1);
    const app = body.metrics[0].data['application-eval-target'];
    expect(app.errors).toMatchObject({ count: 8, sum: 1, mean: 0.125 });
    expect(app.tokens).toMatchObject({ count: 7, sum: 105, mean: 15, min: 15, max: 15, p50: 15 });
    expect(app.duration_ms.count).toBe(8);
    expect(app.attempts).toMatchObject({ count: 8, sum: 13 });
    expect(body.metrics[0].data['evaluator-exact_match'].pass).toMatchObject({ count: 7, mean: 1 });
  });

  it('runs every repeat of every case, with per-case metrics across repeats', async () => {
    const run = await ended((await evaluate(await testset([row('ok-a'), row('ok-b'), row('ok-c')]), { repeats: 2, concurrency: { batch_size: 4 } })).id);
    expect(run.data).toMatchObject({ status: 'success', repeats: 2, progress: { total: 6, success: 6 } });
    const all = await results(run.id);
    expect(all.map((r) => r.repeat_idx)).toEqual([0, 0, 0, 1, 1, 1]);
    expect(new Set(all.map((r) => r.session_id)).size).toBe(6);
    expect((await results(run.id, { repeat_idx: 1 })).map((r) => r.testcase_id)).toEqual(all.slice(0, 3).map((r) => r.testcase_id));
    const { body } = await okJsonText(await api('POST', '/evaluations/metrics/query', { metrics: { run_id: run.id, scenario_ids: true } }));
    // Only the cases' records: the run's is read without scenario_ids.
    expect(body.count).toBe(3);
    expect(body.metrics.map((m: any) => [m.scenario_id, m.data['application-eval-target'].tokens.count])).toEqual(all.slice(0, 3).map((r) => [r.testcase_id, 2]));
  });

  it('starts the cases of one claim apart, not as one burst', async () => {
    const run = await ended((await evaluate(await testset(['ok-s1', 'ok-s2', 'ok-s3', 'ok-s4', 'ok-s5', 'ok-s6'].map((t) => row(t))), { concurrency: { batch_size: 6 } })).id);
    const starts = (await results(run.id)).map((r) => Date.parse(r.attempts[0].started_at)).sort((a, b) => a - b);
    // Each case starts at least a millisecond after the one before it.
    expect(new Set(starts).size).toBe(6);
  });

  it("reads results and metrics with the reference's query bodies", async () => {
    const run = await ended((await evaluate(await testset([row('ok-x'), row('ok-y')]), { repeats: 2 })).id);
    const query = async (body: unknown) => (await okJsonText(await api('POST', '/evaluations/results/query', body))).body;
    const all = (await query({ result: { run_ids: [run.id] }, windowing: { limit: 10 } })).results;
    expect(all).toHaveLength(4);
    const [first, second] = all;
    const stepKey = first.step_key;
    expect((await query({ result: { run_ids: [run.id], scenario_ids: [first.scenario_id], repeat_idxs: [1], statuses: ['success'] } })).results.map((r: any) => r.id)).toEqual([
      all.find((r: any) => r.scenario_id === first.scenario_id && r.repeat_idx === 1).id,
    ]);
    expect((await query({ result: { ids: [second.id] } })).results.map((r: any) => r.id)).toEqual([second.id]);
    expect((await query({ result: { run_id: run.id, step_keys: [stepKey] } })).count).toBe(4);
    expect((await query({ result: { run_id: run.id, step_key: 'application-elsewhere' } })).count).toBe(0);
    // The step key picks runs before a page is read: pages come out full, and no match ends at once.
    const byStep = await query({ result: { run_id: run.id, step_key: stepKey }, windowing: { limit: 3 } });
    expect(byStep.results).toHaveLength(3);
    expect((await query({ result: { run_id: run.id, step_key: stepKey }, windowing: { limit: 3, next: byStep.next } })).results.map((r: any) => r.id)).toEqual([all[3].id]);
    expect(await query({ result: { run_id: run.id, step_key: 'application-elsewhere' }, windowing: { limit: 3 } })).toEqual({ count: 0, results: [] });
    expect(await query({ result: { step_key: 'application-elsewhere' }, windowing: { limit: 1 } })).toEqual({ count: 0, results: [] });
    expect((await query({ result: { step_keys: [stepKey] }, windowing: { limit: 200 } })).results.filter((r: any) => r.run_id === run.id)).toHaveLength(4);
    const paged = await query({ result: { run_id: run.id }, windowing: { limit: 3 } });
    expect((await query({ result: { run_id: run.id }, windowing: { limit: 3, next: paged.next } })).results.map((r: any) => r.id)).toEqual([all[3].id]);

    const metrics = async (body: unknown) => (await okJsonText(await api('POST', '/evaluations/metrics/query', body))).body;
    expect((await metrics({ metrics: { run_ids: [run.id] }, windowing: { limit: 10 } })).count).toBe(1);
    const one = await metrics({ metrics: { run_id: run.id, scenario_id: first.scenario_id } });
    expect(one.metrics.map((m: any) => m.scenario_id)).toEqual([first.scenario_id]);
    expect(one.metrics[0].data[stepKey].tokens.count).toBe(2);
    // The reference's other spellings: the filter under `metric`, `timestamps: false`, status filters.
    expect((await metrics({ metric: { run_ids: [run.id], scenario_ids: false, timestamps: false } })).metrics).toMatchObject([{ run_id: run.id, status: 'success' }]);
    expect((await metrics({ metrics: { run_id: run.id, statuses: ['success'] } })).count).toBe(1);
    expect((await metrics({ metrics: { run_id: run.id, status: 'errors' } })).count).toBe(0);
    await expectError(await api('POST', '/evaluations/metrics/query', { metrics: { run_id: run.id, timestamps: true } }), 400, 'invalid-request', /timestamps/);
    await expectError(await api('POST', '/evaluations/metrics/query', {}), 400, 'invalid-request', /metrics/);
  });

  it('does not retry a key the provider refuses: it would fail the same way', async () => {
    const run = await ended((await evaluate(await testset([row('keyless-1')]), { concurrency: { batch_size: 1, max_retries: 3, retry_delay: 0 } })).id);
    expect(run.data.progress).toMatchObject({ total: 1, failure: 1 });
    const [result] = await results(run.id);
    expect(result.attempts).toHaveLength(1);
    expect(result.attempts[0]).toMatchObject({ status: 'failure', error: { code: 424, type: 'upstream-auth' } });
  });

  it('a case of system messages only fails as invoke refuses it, without calling the model or retrying', async () => {
    const before = h.model.requests.length;
    const systemOnly = { data: { messages: [{ role: 'system', content: 'only rules here' }] } };
    const run = await ended((await evaluate(await testset([systemOnly]), { concurrency: { batch_size: 1, max_retries: 3, retry_delay: 0 } })).id);
    expect(run.data.progress).toMatchObject({ total: 1, failure: 1 });
    const [result] = await results(run.id);
    expect(result.attempts).toHaveLength(1);
    expect(result.attempts[0]).toMatchObject({ status: 'failure', error: { code: 400, type: 'invalid-messages', message: expect.stringMatching(/only system messages/) } });
    expect(h.model.requests.length).toBe(before);
  });

  it("a case's user message may attach a file: the model reads its line, as on invoke", async () => {
    const before = h.model.requests.length;
    const withFile = { data: { messages: [{ role: 'user', content: [{ type: 'text', text: 'attached-1' }, { type: 'file', url: 'data:text/plain,hi', filename: 'hi.txt' }] }] } };
    const run = await ended((await evaluate(await testset([withFile]), { concurrency: { batch_size: 1, max_retries: 0, retry_delay: 0 } })).id);
    expect(run.data.progress).toMatchObject({ total: 1, success: 1 });
    expect(h.model.requests.slice(before).map(userText)).toEqual(['attached-1\n[attached file: attachments/hi.txt (text/plain, 2 bytes)]']);
  });

  it('does not retry a request the provider refuses with a 400: it would be refused again', async () => {
    const run = await ended((await evaluate(await testset([row('too long-1')]), { concurrency: { batch_size: 1, max_retries: 3, retry_delay: 0 } })).id);
    const [result] = await results(run.id);
    expect(result.attempts).toHaveLength(1);
    expect(result.attempts[0]).toMatchObject({ status: 'failure', error: { code: 502, type: 'upstream-rejected', message: expect.stringMatching(/refused the request \(HTTP 400\)/) } });
  });

  it('reruns only the failed cases, with a fresh retry budget, and merges them', async () => {
    healed = false;
    const run = await ended((await evaluate(await testset([row('ok-r'), row('broken-r')]), { concurrency: { batch_size: 2, max_retries: 1 } })).id);
    expect(run.data.status).toBe('errors');
    const before = await results(run.id);
    const stopped = await okJsonText(await api('POST', `/simple/evaluations/${run.id}/stop`));
    expect(stopped.body.evaluation.data.status).toBe('errors');
    healed = true;
    const rerun = await okJsonText(await api('POST', `/simple/evaluations/${run.id}/rerun-failed`));
    expect(rerun.body.evaluation.data.status).toBe('running');
    const after = await ended(run.id);
    expect(after.data).toMatchObject({ status: 'success', progress: { success: 2, failure: 0 } });
    const merged = await results(run.id);
    expect(merged[0]).toEqual(before[0]);
    expect(merged[1].attempts.map((a: any) => a.status)).toEqual(['failure', 'failure', 'success']);
    await expectError(await api('POST', `/simple/evaluations/${run.id}/rerun-failed`), 409, 'conflict', /no failed or cancelled cases/);
  });

  it('stop cancels the cases in flight and those not started; the run ends cancelled', async () => {
    const created = await evaluate(await testset([row('slow-1'), row('slow-2'), row('slow-3'), row('slow-4')]), { concurrency: { batch_size: 2 } });
    // Creating starts the run (spec §4.5): the reply already says so.
    expect(created.data.status).toBe('running');
    expect(created.data.started_at).toBeDefined();
    for (;;) {
      const { body } = await okJsonText(await api('GET', `/simple/evaluations/${created.id}`));
      if (body.evaluation.data.progress.running === 2) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // As clients that declare JSON on every request send it: the content type, and no body.
    const stopped = await configsApi(h, 'POST', `/simple/evaluations/${created.id}/stop`, undefined, undefined, { 'content-type': 'application/json' });
    const { body } = await okJsonText(stopped);
    expect(body.evaluation.data).toMatchObject({ status: 'cancelled', progress: { total: 4, cancelled: 4 } });
    const all = await results(created.id);
    expect(all.map((r) => r.attempts.map((a: any) => a.status))).toEqual([['cancelled'], ['cancelled'], [], []]);
    const { body: list } = await okJsonText(await api('GET', '/simple/evaluations/'));
    expect(list.evaluations[0]).toMatchObject({ id: created.id, data: { status: 'cancelled' } });

    // A stopped run resumes: its cancelled cases run again, and it ends as if it had not stopped.
    quick = true;
    await okJsonText(await api('POST', `/simple/evaluations/${created.id}/rerun-failed`));
    const resumed = await ended(created.id);
    quick = false;
    expect(resumed.data).toMatchObject({ status: 'success', progress: { total: 4, success: 4, cancelled: 0 } });
    expect((await results(created.id)).map((r) => r.attempts.map((a: any) => a.status))).toEqual([['cancelled', 'success'], ['cancelled', 'success'], ['success'], ['success']]);
  });

  it('stop ends a case whose MCP server is still connecting at once, not at the connect deadline', async () => {
    const silent = await startSilentMcpServer();
    try {
      const agent = { ...template(), mcps: [{ name: 'mute', connection: { type: 'http', url: silent.url } }] };
      const app = (await createWorkflow(h, 'eval-mute-mcp', { agent })).revision.id;
      const created = await startRun(h, await testset([row('ok-mute')]), app);
      await silent.asked;
      const asked = Date.now();
      const { body } = await okJsonText(await api('POST', `/simple/evaluations/${created.id}/stop`));
      // AGENTD_MCP_TIMEOUT_MS is 10 s here: the stop did not wait for it.
      expect(Date.now() - asked).toBeLessThan(5_000);
      expect(body.evaluation.data).toMatchObject({ status: 'cancelled', progress: { total: 1, cancelled: 1 } });
      await silent.closed;
    } finally {
      await silent.close();
    }
  });

  it("answers a query for another project's run as a 404, as every route that names a run does", async () => {
    const run = await ended((await evaluate(await testset([row('ok-guarded')]))).id);
    const other = await h.store.projects.ensure(`other-${run.id}`);
    const outsider = { key: (await h.store.apiKeys.create(other.id, 'editor')).key, projectId: other.id };
    const query = (path: string, body: unknown) => configsApi(h, 'POST', path, body, outsider);
    await expectError(await query('/evaluations/results/query', { result: { run_id: run.id } }), 404, 'not-found', new RegExp(run.id));
    await expectError(await query('/evaluations/results/query', { result: { run_ids: ['no-such-run'] } }), 404, 'not-found', /no-such-run/);
    await expectError(await query('/evaluations/metrics/query', { metrics: { run_id: run.id } }), 404, 'not-found');
    expect((await results(run.id)).map((r) => r.status)).toEqual(['success']);
  });

  it('refuses what cannot run, at creation', async () => {
    const revision = await testset([row('ok-x')]);
    const post = (data: Record<string, unknown>) => api('POST', '/simple/evaluations/', { evaluation: { data: { testset_steps: { [revision]: 'custom' }, application_steps: { [appRevision]: 'auto' }, ...data } } });
    const other = (await createWorkflow(h, 'eval-other', { agent: template() })).revision.id;
    await expectError(await post({ application_steps: { [appRevision]: 'auto', [other]: 'auto' } }), 400, 'invalid-request', /exactly one application/);
    await expectError(await post({ application_steps: ['no-such-revision'] }), 404, 'unknown-reference', /no-such-revision/);
    await expectError(await post({ testset_steps: ['no-such-testset'] }), 404, 'unknown-reference', /no-such-testset/);
    // An origin is one of the reference's three; a misspelt one is told, naming where.
    await expectError(await post({ application_steps: { [appRevision]: 'automatic' } }), 400, 'invalid-request', /origin \("auto", "human" or "custom"\) at evaluation\.data\.application_steps/);
    await expectError(await post({ testset_steps: { [revision]: '' } }), 400, 'invalid-request', /testset_steps/);
    await expectError(await post({ repeats: 0 }), 400, 'invalid-request', /repeats/);
    await expectError(await post({ concurrency: { batch_size: 0 } }), 400, 'invalid-request', /batch_size/);
    await expectError(await post({ concurrency: { max_retries: -1 } }), 400, 'invalid-request', /max_retries/);
    // Whole seconds, as spec §8 has every concurrency field.
    await expectError(await post({ concurrency: { retry_delay: 0.5 } }), 400, 'invalid-request', /retry_delay/);
    await expectError(await post({ evaluators: [{ kind: 'regex', pattern: '(' }] }), 400, 'invalid-request', /pattern/);
  });
});
