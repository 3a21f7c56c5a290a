import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, readJson, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * Invoke given `data.testcase` instead of `data.inputs` (design.md §4): the agent declares one
 * input, so only the test case's `messages` reach the model (spec §4.5.2), and `data.inputs` wins
 * when both are sent.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const user = (content: string) => [{ role: 'user', content }];

describe('data.testcase on invoke', () => {
  it('supplies the conversation, and no other column reaches the model', async () => {
    h.model.reset();
    h.model.script([{ text: 'from the case' }]);
    const testcase = { id: 'tc-1', data: { messages: user('what is 2 + 2?'), expected: 'HIDDEN-EXPECTED', notes: 'HIDDEN-NOTES' } };
    const body = await readJson(await h.invoke({ data: { testcase, parameters: { agent: template() } } }));
    expect(body.data.outputs.messages.at(-1)).toEqual({ role: 'assistant', content: 'from the case' });
    const sent = JSON.stringify(h.model.requests.at(-1)!.body);
    expect(sent).toContain('what is 2 + 2?');
    expect(sent).not.toContain('HIDDEN');
  });

  it('gives way to data.inputs when both are sent', async () => {
    h.model.reset();
    h.model.script([{ text: 'ok' }]);
    await readJson(await h.invoke({ data: { inputs: { messages: user('from inputs') }, testcase: { data: { messages: user('from the case') } }, parameters: { agent: template() } } }));
    const sent = JSON.stringify(h.model.requests.at(-1)!.body);
    expect(sent).toContain('from inputs');
    expect(sent).not.toContain('from the case');
  });

  it('without a messages column is a 400 that names where the conversation belongs', async () => {
    const res = await h.invoke({ data: { testcase: { data: { question: 'no messages here' } }, parameters: { agent: template() } } });
    await expectError(res, 400, 'invalid-messages', 'data.testcase.data.messages is required');
  });
});
