import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, template, type Harness } from '../support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

describe('smoke', () => {
  it('pauses and continues', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'hey' } }] }, { text: 'done' }]);
    const agent = template({ tools: [{ type: 'builtin', name: 'write' }], mode: 'ask' });
    const first = [{ role: 'user', content: 'hi' }];
    const res = await h.invoke({ session_id: 's1', data: { inputs: { messages: first }, parameters: { agent } } });
    const body = await res.json();
    console.log(res.status, JSON.stringify(body, null, 1));
    const out = body.data.outputs.messages;
    out[0].approval.approved = true;
    const res2 = await h.invoke({ session_id: 's1', data: { inputs: { messages: [...first, ...out] }, parameters: { agent } } });
    const body2 = await res2.json();
    console.log(res2.status, JSON.stringify(body2, null, 1), JSON.stringify(h.model.requests.at(-1)?.messages));
    const res3 = await h.invoke({ session_id: 's1', data: { inputs: { messages: [...first, ...out] }, parameters: { agent } } }, {headers: {accept: 'text/event-stream'}});
    console.log(res3.status, await res3.text());
  });
});
