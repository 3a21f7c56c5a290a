import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, readJson, readFrames, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * A turn streams from the model only when somebody reads it as it is written: a JSON reply makes
 * non-streaming calls (a third of the CPU, BENCHMARKS.md), a streamed reply streams, and both give
 * the same output — including a tool step and its result.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const agent = template({ tools: [builtin('ls')] });
const script = () => h.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }, { text: 'The folder is empty.' }]);

describe('model calls', () => {
  it('are not streamed for a JSON reply, and are for a streamed one, with the same output', async () => {
    script();
    h.model.reset();
    const jsonSession = sid('json');
    const json = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'list' }], agent, { session_id: jsonSession })));
    expect(h.model.requests.map((r) => r.stream)).toEqual([false, false]);

    script();
    h.model.reset();
    const sseSession = sid('sse');
    const { frames } = await readFrames(await h.invoke(invokeBody([{ role: 'user', content: 'list' }], agent, { session_id: sseSession }), { headers: { accept: 'text/event-stream' } }));
    expect(h.model.requests.map((r) => r.stream)).toEqual([true, true]);

    expect(frames.map((f) => f.type)).toEqual(expect.arrayContaining(['tool_call', 'tool_result', 'message_delta', 'done']));
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(json.data.outputs.messages.at(-1)).toEqual({ role: 'assistant', content: 'The folder is empty.' });
    // The same turn either way, but for the ids the model minted.
    const stored = async (session: string) => (await h.store.turns.listForSession(h.projectId, session, { limit: 1 }))[0]!;
    const [viaJson, viaStream] = await Promise.all([stored(jsonSession), stored(sseSession)]);
    const withoutIds = (turn: typeof viaJson) => JSON.stringify(turn.output).replace(/"tool_call_id":"[^"]+"/g, '');
    expect(withoutIds(viaJson)).toBe(withoutIds(viaStream));
    expect(viaJson.stop_reason).toBe(viaStream.stop_reason);
  });
});
