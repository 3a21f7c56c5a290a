import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/testing/fake-model.ts';
import { expectError, okJsonText, startHarness, template, type Harness } from '../support/harness.ts';
import { configsApi, createWorkflow } from '../configs/client.ts';
import { storedContent } from '../support/database.ts';
import { createTestset, finalText, postRun, runEnded, runMetricsRecord, runResults, startRun } from './client.ts';

/**
 * Evaluators inside real runs: the LLM judge over the real provider path (the same fake model the
 * agent talks to, told apart by the judge's system prompt), evaluators stored as workflows of the
 * evaluator family and named in evaluator_steps, and the pattern evaluators scoring real outputs.
 */

let h: Harness;
let appRevision: string;
/** The agent's reply by the last user message; anything else gets `answer to <text>`. */
const replies = new Map<string, string>();
/** What the judge answers, by a text its prompt contains (the case's question); else a good verdict. */
const verdicts = new Map<string, string>();
/** The judge's whole reply (an error, say), by a text its prompt contains; before `verdicts`. */
const judgeReplies = new Map<string, (req: RecordedRequest) => object>();

const userText = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
const systemText = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');
const isJudge = (req: RecordedRequest) => systemText(req).includes('You are a strict grader');

function script(req: RecordedRequest) {
  const text = userText(req);
  if (isJudge(req)) {
    for (const [needle, reply] of judgeReplies) if (text.includes(needle)) return reply(req);
    for (const [needle, verdict] of verdicts) if (text.includes(needle)) return { text: verdict };
    return { text: '{"score": 0.8, "reason": "good"}' };
  }
  return { text: replies.get(text) ?? `answer to ${text}`, usage: { input: 6, output: 3 } };
}

let seq = 0;
const unique = (prefix: string) => `${prefix}-${process.pid}-${++seq}`;

const api = (method: string, path: string, body?: unknown) => configsApi(h, method, path, body);
const row = (text: string, extra: Record<string, unknown> = {}) => ({ data: { messages: [{ role: 'user', content: text }], ...extra } });

async function testset(rows: unknown[]): Promise<{ revision: string; ids: string[] }> {
  const created = await createTestset(h, { name: unique('cases'), data: { testcases: rows } });
  return { revision: created.revision_id, ids: created.data.testcase_ids };
}

const post = (testsetRevision: string, data: Record<string, unknown>) => postRun(h, testsetRevision, appRevision, data, unique('run'));
const evaluate = (testsetRevision: string, data: Record<string, unknown>) => startRun(h, testsetRevision, appRevision, data, unique('run'));
const ended = (id: string) => runEnded(h, id);
const results = (runId: string) => runResults(h, runId);
const metrics = (runId: string) => runMetricsRecord(h, runId);

beforeAll(async () => {
  h = await startHarness({ script });
  appRevision = (await createWorkflow(h, 'judged-agent', { agent: template() })).revision.id;
});
afterAll(async () => h.close());

describe('llm_judge in a run', () => {
  it('asks the judge over the provider and scores each case with its verdict', async () => {
    replies.set('judge-q1: capital of Italy?', 'Rome is the capital.');
    const { revision, ids } = await testset([row('judge-q1: capital of Italy?', { reference: 'Rome' }), row('judge-q2: capital of Spain?', { reference: 'Madrid' })]);
    h.model.reset();
    const rubric = 'Score 1 when the answer names the right capital city.';
    const run = await ended((await evaluate(revision, { evaluators: [{ kind: 'llm_judge', rubric, column: 'reference', threshold: 0.7, llm: { model: 'judge-model' } }] })).id);
    expect(run.data).toMatchObject({ status: 'success', progress: { total: 2, success: 2, failure: 0 } });
    expect(run.data.evaluators).toEqual([{ kind: 'llm_judge', name: 'llm_judge', rubric, column: 'reference', threshold: 0.7, llm: { model: 'judge-model' } }]);

    const all = await results(run.id);
    expect(all.map((r) => [r.testcase_id, r.status, finalText(r), r.scores])).toEqual([
      [ids[0], 'success', 'Rome is the capital.', [{ name: 'llm_judge', kind: 'llm_judge', score: 0.8, pass: true, reason: 'good' }]],
      [ids[1], 'success', 'answer to judge-q2: capital of Spain?', [{ name: 'llm_judge', kind: 'llm_judge', score: 0.8, pass: true, reason: 'good' }]],
    ]);

    // Two agent turns and two judge calls reached the model; the judge got the rubric, the
    // question, the answer and the reference, on the model the evaluator names.
    const judged = h.model.requests.filter(isJudge);
    const agent = h.model.requests.filter((r) => !isJudge(r));
    expect(agent.map((r) => [r.model, userText(r)]).sort()).toEqual([
      ['fake-model', 'judge-q1: capital of Italy?'],
      ['fake-model', 'judge-q2: capital of Spain?'],
    ]);
    expect(judged).toHaveLength(2);
    expect(judged.map((r) => r.model)).toEqual(['judge-model', 'judge-model']);
    const italy = judged.find((r) => userText(r).includes('capital of Italy'))!;
    expect(userText(italy)).toBe(`<rubric>\n${rubric}\n</rubric>\n\n<input>\njudge-q1: capital of Italy?\n</input>\n\n<answer>\nRome is the capital.\n</answer>\n\n<reference>\nRome\n</reference>`);
    expect(systemText(italy)).toContain('Reply with ONLY a JSON object');

    const data = (await metrics(run.id)).data['evaluator-llm_judge'];
    expect(data.score).toMatchObject({ count: 2, mean: 0.8, min: 0.8, max: 0.8 });
    expect(data.pass).toMatchObject({ count: 2, sum: 2, mean: 1 });
    expect(data.errors).toMatchObject({ count: 2, sum: 0, mean: 0 });
  });

  it('keeps a case successful when the judge answers nonsense, recording the error on its score', async () => {
    verdicts.set('judge-bad', 'I would rather not grade this.');
    verdicts.set('judge-low', 'Verdict: {"score": 0.3, "reason": "vague"} hope that helps');
    const { revision, ids: caseIds } = await testset([row('judge-ok'), row('judge-bad'), row('judge-low')]);
    const run = await ended((await evaluate(revision, { evaluators: [{ kind: 'llm_judge', name: 'grader', rubric: 'Be fair.' }] })).id);
    expect(run.data).toMatchObject({ status: 'success', progress: { total: 3, success: 3, failure: 0 } });

    const all = await results(run.id);
    expect(all.map((r) => [r.testcase_id, r.status])).toEqual(caseIds.map((id) => [id, 'success']));
    expect(all[0].scores).toEqual([{ name: 'grader', kind: 'llm_judge', score: 0.8, pass: true, reason: 'good' }]);
    expect(all[1].scores).toEqual([{ name: 'grader', kind: 'llm_judge', error: `the judge's reply has no JSON object with a numeric "score": I would rather not grade this.` }]);
    // Prose around the JSON is tolerated; below the default threshold of 0.5 fails.
    expect(all[2].scores).toEqual([{ name: 'grader', kind: 'llm_judge', score: 0.3, pass: false, reason: 'vague' }]);

    const data = (await metrics(run.id)).data['evaluator-grader'];
    expect(data.score).toMatchObject({ count: 2, min: 0.3, max: 0.8 });
    expect(data.score.mean).toBeCloseTo(0.55, 10);
    expect(data.pass).toMatchObject({ count: 2, sum: 1, mean: 0.5 });
    expect(data.errors).toMatchObject({ count: 3, sum: 1 });
  });
  it('keeps the server’s provider key out of the scores when the judge or its provider repeats it', async () => {
    const keyOf = (req: RecordedRequest) => req.headers.authorization!.replace(/^Bearer /, '');
    judgeReplies.set('judge-echo', (req) => ({ text: `my key is ${keyOf(req)}` }));
    judgeReplies.set('judge-refused', (req) => ({ error: { status: 401, message: `Incorrect API key provided: ${keyOf(req)}` } }));
    const { revision } = await testset([row('judge-echo'), row('judge-refused')]);
    const run = await ended((await evaluate(revision, { evaluators: [{ kind: 'llm_judge', name: 'grader', rubric: 'Be fair.' }] })).id);
    const errors = (await results(run.id)).map((r) => r.scores[0].error);
    expect(errors).toEqual([
      `the judge's reply has no JSON object with a numeric "score": my key is [redacted]`,
      expect.stringMatching(/^the judge model failed: .*Incorrect API key provided: \[redacted\]/),
    ]);
    const key = keyOf(h.model.requests.find(isJudge)!);
    for (const { source, text } of await storedContent(h)) expect(text.includes(key), source).toBe(false);
  });
});

describe('evaluator_steps', () => {
  let exactRevision: string;

  beforeAll(async () => {
    const { body } = await okJsonText(
      await api('POST', '/workflows', { slug: 'exact', family: 'evaluator', data: { parameters: { evaluator: { kind: 'exact_match', column: 'expected' } } } }),
      201,
    );
    expect(body.workflow).toMatchObject({ slug: 'exact', family: 'evaluator' });
    exactRevision = body.revision.id;
  });

  it('runs a stored evaluator, its scores named after its workflow slug', async () => {
    replies.set('steps-right', 'the right answer');
    replies.set('steps-wrong', 'some other answer');
    const { revision, ids } = await testset([row('steps-right', { expected: 'the right answer' }), row('steps-wrong', { expected: 'the right answer' })]);
    const created = await evaluate(revision, { evaluator_steps: [exactRevision], evaluators: [{ kind: 'contains', value: 'answer' }] });
    expect(created.data.evaluator_steps).toEqual({ [exactRevision]: 'custom' });
    expect(created.data.evaluators).toEqual([
      { kind: 'exact_match', name: 'exact', column: 'expected', case_sensitive: true },
      { kind: 'contains', name: 'contains', value: 'answer', case_sensitive: false },
    ]);
    const run = await ended(created.id);
    expect(run.data.status).toBe('success');

    const all = await results(run.id);
    expect(all.map((r) => [r.testcase_id, r.scores])).toEqual([
      [
        ids[0],
        [
          { name: 'exact', kind: 'exact_match', score: 1, pass: true },
          { name: 'contains', kind: 'contains', score: 1, pass: true },
        ],
      ],
      [
        ids[1],
        [
          { name: 'exact', kind: 'exact_match', score: 0, pass: false },
          { name: 'contains', kind: 'contains', score: 1, pass: true },
        ],
      ],
    ]);
    const data = (await metrics(run.id)).data;
    expect(data['evaluator-exact'].pass).toMatchObject({ count: 2, sum: 1, mean: 0.5 });
    expect(data['evaluator-contains'].pass).toMatchObject({ count: 2, sum: 2, mean: 1 });
  });

  it('refuses steps that are not evaluators, or whose evaluator is not valid', async () => {
    const { revision } = await testset([row('steps-refused')]);
    await expectError(await post(revision, { evaluator_steps: [appRevision] }), 404, 'unknown-reference', new RegExp(appRevision));
    await expectError(await post(revision, { evaluator_steps: { 'no-such-revision': 'custom' } }), 404, 'unknown-reference', /no-such-revision/);
    // The test set revision is no workflow revision at all.
    await expectError(await post(revision, { evaluator_steps: [revision] }), 404, 'unknown-reference', new RegExp(revision));

    // An evaluator workflow with no built-in evaluator in its parameters.
    const empty = (await createWorkflow(h, 'no-evaluator', { rubric: 'not a spec' }, { family: 'evaluator' })).revision.id;
    await expectError(await post(revision, { evaluator_steps: [empty] }), 400, 'invalid-request', /"no-evaluator".*data\.parameters\.evaluator/);

    // An invalid spec is refused when committed over the API…
    await expectError(
      await api('POST', '/workflows', { slug: 'bad-evaluator', family: 'evaluator', data: { parameters: { evaluator: { kind: 'exact_match', column: '' } } } }),
      400,
      'invalid-request',
      /data\.parameters\.evaluator\.column/,
    );
    // …and one stored by other means is refused when a run names it.
    const { variant } = await h.store.configs.createArtifact(h.projectId, { kind: 'workflow', family: 'evaluator', slug: 'stored-bad-evaluator', variant: 'default' });
    const stored = (await h.store.configs.commit(h.projectId, variant, { parameters: { evaluator: { kind: 'levenshtein' } } }))!;
    await expectError(await post(revision, { evaluator_steps: [stored.id] }), 400, 'invalid-request', /"stored-bad-evaluator".*data\.parameters\.evaluator\.kind/);

    // Names clash between a stored evaluator and an inline one.
    await expectError(await post(revision, { evaluator_steps: [exactRevision], evaluators: [{ kind: 'contains', name: 'exact', value: 'x' }] }), 400, 'invalid-request', /"exact"/);

    // Nothing refused was started.
    const { body } = await okJsonText(await api('GET', '/simple/evaluations/'));
    expect(body.evaluations.filter((e: any) => Object.keys(e.data.testset_steps).includes(revision))).toEqual([]);
  });
});

describe('pattern evaluators in a run', () => {
  it('regex, json_valid and contains score real outputs, passing and failing', async () => {
    replies.set('pattern-1', 'order-123');
    replies.set('pattern-2', '```json\n{"order": 7}\n```');
    replies.set('pattern-3', '[1, 2');
    replies.set('pattern-4', '42');
    const { revision, ids } = await testset([
      row('pattern-1', { needle: '123' }),
      row('pattern-2', { needle: 'ORDER' }),
      row('pattern-3', { needle: 'zzz' }),
      row('pattern-4', { needle: '4' }),
    ]);
    const run = await ended((await evaluate(revision, { evaluators: [{ kind: 'regex', pattern: '^order-\\d+$' }, { kind: 'json_valid' }, { kind: 'contains', column: 'needle' }] })).id);
    expect(run.data).toMatchObject({ status: 'success', progress: { total: 4, success: 4 } });

    const all = await results(run.id);
    expect(all.map((r) => r.testcase_id)).toEqual(ids);
    expect(all.map(finalText)).toEqual(['order-123', '```json\n{"order": 7}\n```', '[1, 2', '42']);
    const verdicts = all.map((r) => r.scores.map((s: any) => [s.name, s.kind, s.score, s.pass]));
    expect(verdicts).toEqual([
      [['regex', 'regex', 1, true], ['json_valid', 'json_valid', 0, false], ['contains', 'contains', 1, true]],
      [['regex', 'regex', 0, false], ['json_valid', 'json_valid', 1, true], ['contains', 'contains', 1, true]],
      [['regex', 'regex', 0, false], ['json_valid', 'json_valid', 0, false], ['contains', 'contains', 0, false]],
      [['regex', 'regex', 0, false], ['json_valid', 'json_valid', 1, true], ['contains', 'contains', 1, true]],
    ]);
    // A failed json_valid says why; the others carry no reason or error.
    expect(all[0].scores[1].reason).toMatch(/^not JSON: /);
    expect(all[2].scores[1].reason).toMatch(/^not JSON: /);
    expect(all.flatMap((r) => r.scores).filter((s: any) => s.error !== undefined)).toEqual([]);

    const data = (await metrics(run.id)).data;
    expect(data['evaluator-regex'].pass).toMatchObject({ count: 4, sum: 1, mean: 0.25 });
    expect(data['evaluator-json_valid'].pass).toMatchObject({ count: 4, sum: 2, mean: 0.5 });
    expect(data['evaluator-contains'].pass).toMatchObject({ count: 4, sum: 3, mean: 0.75 });
    expect(data['evaluator-regex'].score).toMatchObject({ count: 4, mean: 0.25 });
    expect(data['application-judged-agent'].errors).toMatchObject({ count: 4, sum: 0 });
  });
});
