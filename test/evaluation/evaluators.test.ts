import { describe, expect, it } from 'vitest';
import { EvaluatorSpec, type EvaluatorScore } from '../../src/contract/evaluations.ts';
import type { Message } from '../../src/contract/messages.ts';
import { AppError } from '../../src/errors.ts';
import { checkEvaluators, evaluate, finalText, names, type Complete, type EvaluationContext } from '../../src/evaluation/evaluators.ts';
import { regexTest } from '../../src/evaluation/regex-test.ts';

/**
 * The built-in evaluators: every kind passing and failing, the per-case errors that must not throw,
 * the run-creation checks, and the LLM judge against a fake model that records what it was asked.
 */

/** Specs go through the schema, as they do at run creation, so defaults apply. */
const spec = (input: unknown): EvaluatorSpec => EvaluatorSpec.parse(input);

function turn(output: string, testcase: Record<string, unknown> = {}): EvaluationContext {
  return {
    messages: [
      { role: 'tool', content: '', tool_call_id: 'c1', tool_name: 'search', input: { q: 'x' } },
      { role: 'tool', content: 'tool result', tool_call_id: 'c1' },
      { role: 'assistant', content: output },
    ],
    testcase,
  };
}

const run = (input: unknown, context: EvaluationContext, complete?: Complete): Promise<EvaluatorScore> => {
  const s = spec(input);
  return evaluate(s, names([s])[0]!, context, complete);
};

describe('finalText', () => {
  it('is the last assistant message that is not a tool call', () => {
    const messages: Message[] = [
      { role: 'assistant', content: 'first' },
      { role: 'assistant', content: '', tool_name: 'search', tool_call_id: 'c1' },
      { role: 'tool', content: 'result', tool_call_id: 'c1' },
      { role: 'assistant', content: 'final' },
      { role: 'tool', content: 'late', tool_call_id: 'c2' },
    ];
    expect(finalText(messages)).toBe('final');
  });

  it('is empty without an assistant message', () => {
    expect(finalText([{ role: 'user', content: 'hi' }])).toBe('');
    expect(finalText([])).toBe('');
  });
});

describe('exact_match', () => {
  it('passes on the trimmed expected column, case-sensitively by default', async () => {
    expect(await run({ kind: 'exact_match' }, turn('  Paris \n', { expected: 'Paris' }))).toEqual({ name: 'exact_match', kind: 'exact_match', score: 1, pass: true });
    expect(await run({ kind: 'exact_match' }, turn('paris', { expected: 'Paris' }))).toEqual({ name: 'exact_match', kind: 'exact_match', score: 0, pass: false });
  });

  it('ignores case when case_sensitive is false, and reads the named column', async () => {
    expect(await run({ kind: 'exact_match', column: 'answer', case_sensitive: false }, turn('PARIS', { answer: 'paris' }))).toMatchObject({ score: 1, pass: true });
    expect(await run({ kind: 'exact_match', column: 'answer', case_sensitive: false }, turn('Lyon', { answer: 'paris' }))).toMatchObject({ score: 0, pass: false });
  });

  it('compares non-string columns by their JSON', async () => {
    expect(await run({ kind: 'exact_match' }, turn('42', { expected: 42 }))).toMatchObject({ score: 1, pass: true });
    expect(await run({ kind: 'exact_match' }, turn('{"a":1}', { expected: { a: 1 } }))).toMatchObject({ score: 1, pass: true });
  });

  it('reports a missing column with the columns present, without a score', async () => {
    const score = await run({ kind: 'exact_match', name: 'capital' }, turn('Paris', { messages: [], answer: 'Paris' }));
    expect(score).toEqual({ name: 'capital', kind: 'exact_match', error: 'the test case has no column "expected"; its columns are messages, answer' });
  });
});

describe('contains', () => {
  it('looks for a fixed value, ignoring case by default', async () => {
    expect(await run({ kind: 'contains', value: 'PARIS' }, turn('The capital is Paris.'))).toEqual({ name: 'contains', kind: 'contains', score: 1, pass: true });
    expect(await run({ kind: 'contains', value: 'Lyon' }, turn('The capital is Paris.'))).toEqual({ name: 'contains', kind: 'contains', score: 0, pass: false });
  });

  it('respects case_sensitive', async () => {
    expect(await run({ kind: 'contains', value: 'PARIS', case_sensitive: true }, turn('The capital is Paris.'))).toMatchObject({ score: 0, pass: false });
    expect(await run({ kind: 'contains', value: 'Paris', case_sensitive: true }, turn('The capital is Paris.'))).toMatchObject({ score: 1, pass: true });
  });

  it('looks for a column value, and reports a missing or empty column', async () => {
    expect(await run({ kind: 'contains', column: 'city' }, turn('It is Paris.', { city: 'paris' }))).toMatchObject({ score: 1, pass: true });
    expect(await run({ kind: 'contains', column: 'city' }, turn('It is Paris.', { town: 'paris' }))).toEqual({ name: 'contains', kind: 'contains', error: 'the test case has no column "city"; its columns are town' });
    expect(await run({ kind: 'contains', column: 'city' }, turn('It is Paris.', { city: '' }))).toEqual({ name: 'contains', kind: 'contains', error: 'the test case column "city" is empty' });
  });
});

describe('regex', () => {
  it('tests the output', async () => {
    expect(await run({ kind: 'regex', pattern: '^\\d{3}-\\d{4}$' }, turn('555-1234'))).toEqual({ name: 'regex', kind: 'regex', score: 1, pass: true });
    expect(await run({ kind: 'regex', pattern: '^\\d{3}-\\d{4}$' }, turn('call 555-1234'))).toMatchObject({ score: 0, pass: false });
  });

  it('applies flags', async () => {
    expect(await run({ kind: 'regex', pattern: '^paris$' }, turn('PARIS'))).toMatchObject({ pass: false });
    expect(await run({ kind: 'regex', pattern: '^paris$', flags: 'i' }, turn('PARIS'))).toMatchObject({ pass: true });
    expect(await run({ kind: 'regex', pattern: '^second$', flags: 'm' }, turn('first\nsecond'))).toMatchObject({ pass: true });
    expect(await run({ kind: 'regex', pattern: 'a.b', flags: 's' }, turn('a\nb'))).toMatchObject({ pass: true });
  });

  it('turns an invalid pattern into an error', async () => {
    const score = await run({ kind: 'regex', pattern: '(unclosed' }, turn('x'));
    expect(score.score).toBeUndefined();
    expect(score.pass).toBeUndefined();
    expect(score.error).toMatch(/^invalid regular expression: .*unclosed/);
  });

  it('a pattern that backtracks without end fails its case and never stalls the server’s thread', async () => {
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 20);
    try {
      const score = await run({ kind: 'regex', pattern: '(a+)+$' }, turn(`${'a'.repeat(40)}b`));
      expect(score).toMatchObject({ name: 'regex', kind: 'regex', error: expect.stringMatching(/ran longer than 2000 ms.*simplify it/) });
      // The event loop went on while the thread was stuck: about 100 ticks in 2 s, never none.
      expect(ticks).toBeGreaterThan(20);
    } finally {
      clearInterval(ticker);
    }
  });

  it('tests queued behind one that runs over its time are answered by a new thread', async () => {
    const stuck = regexTest('(a+)+$', '', `${'a'.repeat(40)}b`, 300);
    const behind = [regexTest('^x', '', 'xyz', 300), regexTest('^x', 'i', 'XYZ', 300), regexTest('^y', '', 'xyz', 300)];
    await expect(stuck).rejects.toThrow(/ran longer than 300 ms/);
    expect(await Promise.all(behind)).toEqual([true, true, false]);
    expect(await regexTest('b$', '', 'ab')).toBe(true);
  });
});

describe('json_valid', () => {
  it('passes on JSON, bare or in a fenced block', async () => {
    expect(await run({ kind: 'json_valid' }, turn(' {"a": [1, 2]} '))).toEqual({ name: 'json_valid', kind: 'json_valid', score: 1, pass: true });
    expect(await run({ kind: 'json_valid' }, turn('```json\n{"a": 1}\n```'))).toMatchObject({ score: 1, pass: true });
    expect(await run({ kind: 'json_valid' }, turn('```\n[1, 2]\n```'))).toMatchObject({ score: 1, pass: true });
  });

  it('fails on text that is not JSON, with the parse error as reason', async () => {
    const score = await run({ kind: 'json_valid' }, turn('{"a": 1,}'));
    expect(score).toMatchObject({ score: 0, pass: false });
    expect(score.reason).toMatch(/^not JSON: /);
    expect(await run({ kind: 'json_valid' }, turn('Here it is: {"a": 1}'))).toMatchObject({ score: 0, pass: false });
    expect(await run({ kind: 'json_valid' }, turn(''))).toMatchObject({ score: 0, pass: false });
  });
});

describe('names', () => {
  it('uses explicit names, else the kind, numbering further unnamed evaluators of a kind', () => {
    const specs = [{ kind: 'contains', value: 'a' }, { kind: 'json_valid' }, { kind: 'contains', value: 'b' }, { kind: 'contains', name: 'mine', value: 'c' }, { kind: 'contains', value: 'd' }].map(spec);
    expect(names(specs)).toEqual(['contains', 'json_valid', 'contains-2', 'mine', 'contains-3']);
  });

  it('skips names an explicit evaluator already took', () => {
    const specs = [{ kind: 'json_valid' }, { kind: 'json_valid', name: 'json_valid-2' }, { kind: 'json_valid' }, { kind: 'regex', name: 'json_valid', pattern: 'x' }].map(spec);
    expect(names(specs)).toEqual(['json_valid-3', 'json_valid-2', 'json_valid-4', 'json_valid']);
  });
});

describe('checkEvaluators', () => {
  it('accepts valid specs', () => {
    expect(() => checkEvaluators([spec({ kind: 'regex', pattern: '^a+$', flags: 'iu' }), spec({ kind: 'json_valid', name: 'j' })])).not.toThrow();
  });

  it('names an invalid pattern', () => {
    const call = () => checkEvaluators([spec({ kind: 'json_valid' }), spec({ kind: 'regex', pattern: '[z-a]' })]);
    expect(call).toThrow(AppError);
    expect(call).toThrow(/^data\.evaluators\[1\]\.pattern is not a valid regular expression: /);
    try {
      call();
    } catch (error) {
      expect((error as AppError).type).toBe('invalid-request');
      expect((error as AppError).status).toBe(400);
    }
  });

  it('rejects a pattern that is only invalid with its flags', () => {
    expect(() => checkEvaluators([spec({ kind: 'regex', pattern: '\\p{L', flags: 'u' })])).toThrow(/data\.evaluators\[0\]\.pattern/);
  });

  it('names duplicate explicit names', () => {
    const specs = [spec({ kind: 'json_valid', name: 'dup' }), spec({ kind: 'json_valid' }), spec({ kind: 'contains', name: 'dup', value: 'x' })];
    expect(() => checkEvaluators(specs)).toThrow('data.evaluators[2].name: "dup" is already the name of data.evaluators[0]; evaluator names must be unique');
  });
});

describe('llm_judge', () => {
  function fakeModel(reply: string | (() => never)) {
    const calls: Parameters<Complete>[0][] = [];
    const complete: Complete = async (prompt) => {
      calls.push(prompt);
      return typeof reply === 'string' ? reply : reply();
    };
    return { calls, complete };
  }

  const testcase = {
    messages: [
      { role: 'user', content: 'What is the capital of France?' },
      { role: 'assistant', content: 'an earlier answer' },
      { role: 'user', content: [{ type: 'text', text: 'Answer in one word.' }] },
    ],
    reference: 'Paris',
  };

  it('asks the model with the rubric, input, output and reference, and scores its verdict', async () => {
    const model = fakeModel('Sure! {"score": 0.8, "reason": "good"}');
    const score = await run({ kind: 'llm_judge', name: 'judge', rubric: 'Is the answer correct?', column: 'reference', llm: { provider: 'openai', model: 'gpt-4o-mini' } }, turn('Paris.', testcase), model.complete);
    expect(score).toEqual({ name: 'judge', kind: 'llm_judge', score: 0.8, pass: true, reason: 'good' });
    expect(model.calls).toHaveLength(1);
    const call = model.calls[0]!;
    expect(call.provider).toBe('openai');
    expect(call.model).toBe('gpt-4o-mini');
    expect(call.system).toMatch(/strict grader/);
    expect(call.system).toMatch(/ONLY a JSON object/);
    expect(call.prompt).toContain('<rubric>\nIs the answer correct?\n</rubric>');
    expect(call.prompt).toContain('<input>\nWhat is the capital of France?\n\nAnswer in one word.\n</input>');
    expect(call.prompt).toContain('<answer>\nParis.\n</answer>');
    expect(call.prompt).toContain('<reference>\nParis\n</reference>');
    expect(call.prompt).not.toContain('an earlier answer');
    expect(call.prompt).not.toContain('tool result');
  });

  it('leaves out the reference and input when there are none, and passes no provider unless set', async () => {
    const model = fakeModel('{"score": 0.2}');
    const score = await run({ kind: 'llm_judge', rubric: 'Be polite.' }, turn('Go away.', { reference: 'secret' }), model.complete);
    expect(score).toEqual({ name: 'llm_judge', kind: 'llm_judge', score: 0.2, pass: false });
    const call = model.calls[0]!;
    expect(call).not.toHaveProperty('provider');
    expect(call).not.toHaveProperty('model');
    expect(call.prompt).not.toContain('<reference>');
    expect(call.prompt).not.toContain('<input>');
    expect(call.prompt).not.toContain('secret');
  });

  it('passes at the threshold, and honours a custom threshold', async () => {
    expect(await run({ kind: 'llm_judge', rubric: 'r' }, turn('x'), fakeModel('{"score": 0.5}').complete)).toMatchObject({ score: 0.5, pass: true });
    expect(await run({ kind: 'llm_judge', rubric: 'r', threshold: 0.9 }, turn('x'), fakeModel('{"score": 0.8}').complete)).toMatchObject({ score: 0.8, pass: false });
  });

  it('clamps the score into 0..1', async () => {
    expect(await run({ kind: 'llm_judge', rubric: 'r' }, turn('x'), fakeModel('{"score": 3}').complete)).toMatchObject({ score: 1, pass: true });
    expect(await run({ kind: 'llm_judge', rubric: 'r' }, turn('x'), fakeModel('{"score": -2}').complete)).toMatchObject({ score: 0, pass: false });
  });

  it('reads a verdict in a code fence, with braces inside its reason', async () => {
    const reply = 'Here is my verdict:\n```json\n{"score": 0.9, "reason": "uses {braces} and \\"quotes\\""}\n```\nThanks.';
    expect(await run({ kind: 'llm_judge', rubric: 'r' }, turn('x'), fakeModel(reply).complete)).toEqual({ name: 'llm_judge', kind: 'llm_judge', score: 0.9, pass: true, reason: 'uses {braces} and "quotes"' });
  });

  it('skips objects without a numeric score', async () => {
    const reply = 'Given {"criteria": 1} and {"score": "high"}, my answer: {"score": 0.3, "reason": "weak"}';
    expect(await run({ kind: 'llm_judge', rubric: 'r' }, turn('x'), fakeModel(reply).complete)).toMatchObject({ score: 0.3, pass: false, reason: 'weak' });
  });

  it('truncates a long reason to 1000 characters', async () => {
    const score = await run({ kind: 'llm_judge', rubric: 'r' }, turn('x'), fakeModel(JSON.stringify({ score: 1, reason: 'a'.repeat(5000) })).complete);
    expect(score.reason).toHaveLength(1000);
    expect(score.reason!.endsWith('…')).toBe(true);
  });

  it('reports a reply without JSON', async () => {
    expect(await run({ kind: 'llm_judge', rubric: 'r' }, turn('x'), fakeModel('no json').complete)).toEqual({ name: 'llm_judge', kind: 'llm_judge', error: 'the judge\'s reply has no JSON object with a numeric "score": no json' });
    const long = await run({ kind: 'llm_judge', rubric: 'r' }, turn('x'), fakeModel('x'.repeat(2000)).complete);
    expect(long.error).toHaveLength(500);
  });

  it('reports a model that throws', async () => {
    const model = fakeModel(() => {
      throw new Error('rate limited');
    });
    expect(await run({ kind: 'llm_judge', rubric: 'r' }, turn('x'), model.complete)).toEqual({ name: 'llm_judge', kind: 'llm_judge', error: 'the judge model failed: rate limited' });
  });

  it('reports a missing model and a missing reference column without asking', async () => {
    expect(await run({ kind: 'llm_judge', rubric: 'r' }, turn('x'))).toEqual({ name: 'llm_judge', kind: 'llm_judge', error: 'no model configured for llm_judge' });
    const model = fakeModel('{"score": 1}');
    expect(await run({ kind: 'llm_judge', rubric: 'r', column: 'gold' }, turn('x', { expected: 'y' }), model.complete)).toEqual({ name: 'llm_judge', kind: 'llm_judge', error: 'the test case has no column "gold"; its columns are expected' });
    expect(model.calls).toHaveLength(0);
  });
});
