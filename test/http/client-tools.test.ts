import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, expectError, invokeBody, readFrames, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/** design.md §4 "Built-in tools": a `client` tool pauses the turn for the caller to run it. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const pickColor = {
  type: 'client',
  name: 'pick_color',
  description: 'Ask the user to pick a colour',
  input_schema: { type: 'object', properties: { options: { type: 'array', items: { type: 'string' } } }, required: ['options'] },
};
const agent = template({ tools: [pickColor, builtin('ls')], mode: 'allow' });
const first = [{ role: 'user', content: 'pick a colour' }];

async function paused(session = sid('client')) {
  h.model.script([{ toolCalls: [{ name: 'pick_color', input: { options: ['red', 'blue'] } }] }, { text: 'You picked blue.' }]);
  const json = await readJson(await h.invoke(invokeBody(first, agent, { session_id: session })));
  return { session, json, out: json.data.outputs, messages: json.data.outputs.messages as Array<Record<string, any>> };
}

describe('client tools', () => {
  it('are offered to the model with their schema', async () => {
    h.model.reset();
    await paused();
    const offered = h.model.requests[0]!.body.tools.find((t: { name: string }) => t.name === 'pick_color');
    expect(offered).toMatchObject({ name: 'pick_color', description: 'Ask the user to pick a colour' });
    expect(offered.parameters.properties.options).toEqual({ type: 'array', items: { type: 'string' } });
  });

  it('pause the turn with a client_tool interaction, even under allow', async () => {
    const { session, out, messages } = await paused();
    expect(out.stop_reason).toBe('paused');
    expect(out.pending_interaction).toEqual({
      id: expect.any(String),
      kind: 'client_tool',
      tool: 'pick_color',
      payload: {
        tool_call_id: messages[0]!.tool_call_id,
        tool_name: 'pick_color',
        input: { options: ['red', 'blue'] },
        toolCallId: messages[0]!.tool_call_id,
        toolName: 'pick_color',
        toolCall: { toolCallId: messages[0]!.tool_call_id, name: 'pick_color', title: 'pick_color', rawInput: { options: ['red', 'blue'] }, kind: 'client' },
      },
    });
    expect(messages).toEqual([{ role: 'tool', content: '', tool_call_id: expect.any(String), tool_name: 'pick_color', input: { options: ['red', 'blue'] } }]);
    const record = await h.store.interactions.get(h.projectId, out.pending_interaction.id);
    expect(record).toMatchObject({ status: 'pending', kind: 'client_tool', session_id: session });
  });

  it('a pause is announced on the stream as an interaction_request frame and in done', async () => {
    h.model.script({ toolCalls: [{ name: 'pick_color', input: { options: ['red'] } }] });
    const res = await h.invoke(invokeBody(first, agent), { headers: { accept: 'text/event-stream' } });
    const { frames } = await readFrames(res);
    const request = frames.find((f) => f.type === 'interaction_request');
    expect(request!.data).toMatchObject({ kind: 'client_tool', tool: 'pick_color' });
    expect(frames.at(-1)).toEqual({ type: 'done', data: { stop_reason: 'paused', stopReason: 'paused', pending_interaction: request!.data } });
  });

  it('continue when the caller appends the result: the model gets it, the turn completes, the interaction resolves', async () => {
    const p = await paused();
    h.model.reset();
    const result = { role: 'tool', tool_call_id: p.messages[0]!.tool_call_id, content: 'blue' };
    const json = await readJson(await h.invoke(invokeBody([...first, ...p.messages, result], agent, { session_id: p.session })));
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(json.data.outputs.messages).toEqual([{ role: 'assistant', content: 'You picked blue.' }]);
    const seen = h.model.requests[0]!.messages;
    expect(seen.at(-1)).toMatchObject({ role: 'tool', content: 'blue', tool_call_id: p.messages[0]!.tool_call_id, name: 'pick_color' });
    const record = await h.store.interactions.get(h.projectId, p.out.pending_interaction.id);
    expect(record).toMatchObject({ status: 'resolved', answer: { output: 'blue' } });
  });

  it('an error result is passed on as an error', async () => {
    const p = await paused();
    h.model.reset();
    const result = { role: 'tool', tool_call_id: p.messages[0]!.tool_call_id, content: 'the user closed the dialog', is_error: true };
    const json = await readJson(await h.invoke(invokeBody([...first, ...p.messages, result], agent, { session_id: p.session })));
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(h.model.requests[0]!.messages.at(-1)).toMatchObject({ role: 'tool', content: expect.stringContaining('the user closed the dialog') });
    expect((await h.store.interactions.get(h.projectId, p.out.pending_interaction.id))!.answer).toEqual({ error: 'the user closed the dialog' });
  });

  it("take their result as a tool_result block, the reference implementation's native format", async () => {
    const p = await paused();
    h.model.reset();
    const call = p.messages[0]!;
    const blocks = {
      role: 'assistant',
      content: [
        { type: 'tool_call', toolCallId: call.tool_call_id, toolName: call.tool_name, input: call.input },
        { type: 'tool_result', toolCallId: call.tool_call_id, output: { colour: 'blue' } },
      ],
    };
    const json = await readJson(await h.invoke(invokeBody([...first, blocks], agent, { session_id: p.session })));
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(h.model.requests[0]!.messages.at(-1)).toMatchObject({ role: 'tool', content: '{"colour":"blue"}', tool_call_id: call.tool_call_id });
    expect(await h.store.interactions.get(h.projectId, p.out.pending_interaction.id)).toMatchObject({ status: 'resolved', answer: { output: '{"colour":"blue"}' } });
  });

  it('a result repeated as it was is one result; another result for the same call is a 400', async () => {
    const p = await paused();
    const id = p.messages[0]!.tool_call_id;
    const result = { role: 'tool', tool_call_id: id, content: 'blue' };
    await readJson(await h.invoke(invokeBody([...first, ...p.messages, result], agent, { session_id: p.session })));
    // A client that appended what it got after its own answer (a continuation may tell it again) holds it twice.
    h.model.reset();
    h.model.script({ text: 'still blue' });
    const again = [...first, ...p.messages, result, result, { role: 'assistant', content: 'You picked blue.' }, { role: 'user', content: 'sure?' }];
    expect((await readJson(await h.invoke(invokeBody(again, agent, { session_id: p.session })))).data.outputs.stop_reason).toBe('end_turn');
    expect(h.model.requests[0]!.messages.filter((m: { role: string }) => m.role === 'tool')).toHaveLength(1);
    const other = [...first, ...p.messages, result, { ...result, content: 'red' }, { role: 'user', content: 'sure?' }];
    await expectError(await h.invoke(invokeBody(other, agent, { session_id: p.session })), 400, 'invalid-messages', /second result for call .* at data\.inputs\.messages\[3\]/);
  });

  it('re-posting the call without its result → 400 saying what to append', async () => {
    const p = await paused();
    const res = await h.invoke(invokeBody([...first, ...p.messages], agent, { session_id: p.session }));
    await expectError(res, 400, 'invalid-messages', /append .*"role":"tool".*data\.inputs\.messages\[1\]/);
  });

  it('a client tool named like a built-in is refused', async () => {
    const res = await h.invoke(invokeBody(first, template({ tools: [{ ...pickColor, name: 'bash' }] })));
    await expectError(res, 400, 'invalid-request', 'data.parameters.agent.tools[0].name');
  });

  it('a client tool with permission deny is refused without pausing', async () => {
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: { options: ['red'] } }] }, { text: 'Could not ask.' }]);
    const json = await readJson(await h.invoke(invokeBody(first, template({ tools: [{ ...pickColor, permission: 'deny' }] }))));
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(json.data.outputs.pending_interaction).toBeUndefined();
    expect(json.data.outputs.messages.find((m: { is_error?: boolean }) => m.is_error !== undefined)).toMatchObject({ is_error: true });
  });
});
