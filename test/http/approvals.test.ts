import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, expectError, invokeBody, readFrames, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * In-band continuation in the native format (spec §4.6.2, design.md §4 "In-band decisions"): the
 * caller re-posts the paused call with `approval: {id, approved, reason?}`.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const agent = template({ tools: [builtin('write')], mode: 'ask' });
const first = [{ role: 'user', content: 'please write a.txt' }];

/** Runs a turn that pauses on `write a.txt <content>` and returns what a caller needs to continue it. */
async function paused(content = 'original', session = sid('appr')) {
  h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content } }] }, { text: 'The file is written.' }]);
  const json = await readJson(await h.invoke(invokeBody(first, agent, { session_id: session })));
  expect(json.data.outputs.stop_reason).toBe('paused');
  const messages = json.data.outputs.messages as Array<Record<string, any>>;
  const id = json.data.outputs.pending_interaction.id as string;
  return { session, id, turnId: json.turn_id as string, messages, file: `${h.sessionDir(session)}/a.txt` };
}

function decide(messages: Array<Record<string, any>>, approval: Record<string, unknown>, patch: Record<string, unknown> = {}) {
  return messages.map((m) => (m.approval ? { ...m, ...patch, approval: { ...m.approval, ...approval } } : m));
}

const repost = (session: string, messages: unknown[], headers: Record<string, string> = {}) =>
  h.invoke(invokeBody([...first, ...messages], agent, { session_id: session }), { headers });

describe('approve', () => {
  it('runs the tool, resolves the interaction and continues to the final text', async () => {
    const p = await paused('approved content');
    expect(await h.store.pausedStates.get(h.projectId, p.turnId)).toMatchObject({ history: first });
    h.model.reset();
    const json = await readJson(await repost(p.session, decide(p.messages, { approved: true })));
    const out = json.data.outputs;
    expect(out.stop_reason).toBe('end_turn');
    expect(out.messages.at(-1)).toEqual({ role: 'assistant', content: 'The file is written.' });
    expect(out.messages[0]).toMatchObject({ role: 'tool', tool_call_id: p.messages[0]!.tool_call_id, is_error: false });
    expect(await readFile(p.file, 'utf8')).toBe('approved content');
    const record = await h.store.interactions.get(h.projectId, p.id);
    expect(record).toMatchObject({ status: 'resolved', answer: { approved: true }, resolution: { via: 'in_band', turn_id: json.turn_id } });
    expect(h.model.requests).toHaveLength(1);
    expect(h.model.requests[0]!.messages.find((m) => m.role === 'tool')?.content).toContain('a.txt');
    // Settled: no turn goes on from that pause again, so its state is not kept.
    expect(await h.store.pausedStates.get(h.projectId, p.turnId)).toBeUndefined();
  });

  it.each([
    ['a JSON reply', {} as Record<string, string>],
    ['a stream', { accept: 'text/event-stream' }],
  ])('two calls of one step, the first approved and the second denied, settle in call order in %s', async (_how, headers) => {
    const session = sid('appr2');
    h.model.script([
      { toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'A' } }, { name: 'write', input: { path: 'b.txt', content: 'B' } }] },
      { text: 'One written, one refused.' },
    ]);
    const pausedTwice = (await readJson(await h.invoke(invokeBody(first, agent, { session_id: session })))).data.outputs.messages as Array<Record<string, any>>;
    expect(pausedTwice.map((m) => m.approval?.id).filter(Boolean)).toHaveLength(2);
    const answered = pausedTwice.map((m, i) => ({ ...m, approval: { ...m.approval, approved: i === 0 } }));
    const res = await repost(session, answered, headers);
    // The denial settles at once and the write only once it has run; the results still follow the calls.
    const results = headers.accept
      ? (await readFrames(res)).frames.filter((f) => f.type === 'tool_result').map((f) => [f.data.id, f.data.is_error])
      : (await readJson(res)).data.outputs.messages.filter((m: Record<string, unknown>) => m.role === 'tool').map((m: Record<string, unknown>) => [m.tool_call_id, m.is_error]);
    expect(results).toEqual([
      [pausedTwice[0]!.tool_call_id, false],
      [pausedTwice[1]!.tool_call_id, true],
    ]);
    expect(existsSync(`${h.sessionDir(session)}/b.txt`)).toBe(false);
  });

  it('works when the continuation is streamed', async () => {
    const p = await paused('streamed');
    const res = await repost(p.session, decide(p.messages, { approved: true }), { accept: 'text/event-stream' });
    const { frames } = await readFrames(res);
    const types = frames.map((f) => f.type);
    expect(types[0]).toBe('turn_start');
    expect(types).toContain('tool_result');
    expect(frames.at(-1)).toEqual({ type: 'done', data: { stop_reason: 'end_turn', stopReason: 'end_turn' } });
    expect(await readFile(p.file, 'utf8')).toBe('streamed');
  });

  it('runs the ORIGINAL input when the re-post edits it', async () => {
    const p = await paused('safe content');
    const res = await repost(p.session, decide(p.messages, { approved: true }, { input: { path: 'evil.txt', content: 'rm -rf /' } }));
    expect(res.status).toBe(200);
    await readJson(res);
    expect(await readFile(p.file, 'utf8')).toBe('safe content');
    expect(existsSync(`${h.sessionDir(p.session)}/evil.txt`)).toBe(false);
  });

  it('re-posting the same decision again → 409 interaction-not-pending, and nothing runs', async () => {
    const p = await paused();
    const again = decide(p.messages, { approved: true });
    expect((await repost(p.session, again)).status).toBe(200);
    h.model.reset();
    const body = await expectError(await repost(p.session, again), 409, 'interaction-not-pending', p.id);
    // Where the outcome is, for a page that re-posted after a refresh.
    expect(body.status.message).toMatch(/is resolved.*messages\[1\]\.approval.*GET \/api\/sessions\/\{session_id\}/);
    expect(h.model.requests).toHaveLength(0);
  });
});

describe('deny', () => {
  it('does not run the tool, tells the model why, and resolves the interaction', async () => {
    const p = await paused();
    h.model.script({ text: 'Understood, I will not write it.' });
    h.model.reset();
    const json = await readJson(await repost(p.session, decide(p.messages, { approved: false, reason: 'not today' })));
    const out = json.data.outputs;
    expect(out.stop_reason).toBe('end_turn');
    expect(existsSync(p.file)).toBe(false);
    expect(out.messages[0]).toMatchObject({ role: 'tool', tool_call_id: p.messages[0]!.tool_call_id, is_error: true, content: expect.stringMatching(/denied.*not today/i) });
    const toolMessage = h.model.requests.at(-1)!.messages.find((m) => m.role === 'tool');
    expect(toolMessage?.content).toContain('not today');
    const record = await h.store.interactions.get(h.projectId, p.id);
    expect(record).toMatchObject({ status: 'resolved', answer: { approved: false, reason: 'not today' } });

    // The next turn carries the whole conversation: the denied call reads as it did just now.
    h.model.script({ text: 'Anything else?' });
    const history = [...decide(p.messages, { approved: false, reason: 'not today' }), ...out.messages, { role: 'user', content: 'no' }];
    expect((await readJson(await repost(p.session, history))).data.outputs.stop_reason).toBe('end_turn');
    expect(h.model.requests.at(-1)!.messages.find((m) => m.role === 'tool')).toEqual(toolMessage);
  });

  it('a denial without a reason still reaches the model as a denial', async () => {
    const p = await paused();
    h.model.script({ text: 'ok' });
    h.model.reset();
    const json = await readJson(await repost(p.session, decide(p.messages, { approved: false })));
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(existsSync(p.file)).toBe(false);
    expect(h.model.requests.at(-1)!.messages.find((m) => m.role === 'tool')?.content).toMatch(/denied/i);
  });
});

describe('bad decisions', () => {
  it('an unknown approval id → 400 invalid-approval', async () => {
    const p = await paused();
    const messages = p.messages.map((m) => ({ ...m, approval: { id: 'no-such-approval', approved: true } }));
    await expectError(await repost(p.session, messages), 400, 'invalid-approval', 'no-such-approval');
    expect(existsSync(p.file)).toBe(false);
    expect((await h.store.interactions.get(h.projectId, p.id))!.status).toBe('pending');
  });

  it('an approval id from another session → 400, and neither interaction moves', async () => {
    const a = await paused('from a');
    const b = await paused('from b');
    // Session b re-posts a's paused call with a's approval id.
    await expectError(await repost(b.session, decide(a.messages, { approved: true })), 400, 'invalid-approval');
    expect(existsSync(a.file)).toBe(false);
    expect(existsSync(b.file)).toBe(false);
    expect((await h.store.interactions.get(h.projectId, a.id))!.status).toBe('pending');
  });

  it('an approval id moved onto another call of the same session → 400', async () => {
    const p = await paused();
    const messages = p.messages.map((m) => ({ ...m, tool_call_id: 'call_other', approval: { id: p.id, approved: true } }));
    await expectError(await repost(p.session, messages), 400, 'invalid-approval');
  });

  it('re-posting the paused call without a decision → 400 naming the message', async () => {
    const p = await paused();
    await expectError(await repost(p.session, p.messages), 400, 'invalid-approval', 'data.inputs.messages[1].approval');
  });

  it('a non-boolean approved → 400 naming the path', async () => {
    const p = await paused();
    await expectError(await repost(p.session, decide(p.messages, { approved: 'yes' })), 400, undefined, 'data.inputs.messages[1].approval.approved');
  });
});

describe('abandoning a pause', () => {
  it('a new user message instead of a decision cancels the pending interaction', async () => {
    const p = await paused();
    h.model.script({ text: 'Sure, something else.' });
    h.model.reset();
    const res = await repost(p.session, [...p.messages, { role: 'user', content: 'never mind, do something else' }]);
    const json = await readJson(res);
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect((await h.store.interactions.get(h.projectId, p.id))!.status).toBe('cancelled');
    expect(await h.store.pausedStates.get(h.projectId, p.turnId)).toBeUndefined();
    expect(existsSync(p.file)).toBe(false);
    // The abandoned call has no result, so it is not sent to the provider (which would refuse it).
    expect(h.model.requests[0]!.messages.some((m) => m.tool_calls?.length)).toBe(false);
  });

  it('a decision followed by a new user message comes too late: the call does not run and the turn answers the message', async () => {
    const p = await paused();
    h.model.script({ text: 'Answering the new question.' });
    h.model.reset();
    const res = await repost(p.session, [...decide(p.messages, { approved: true }), { role: 'user', content: 'something else first' }]);
    const json = await readJson(res);
    expect(json.data.outputs).toMatchObject({ stop_reason: 'end_turn', messages: [{ role: 'assistant', content: 'Answering the new question.' }] });
    expect((await h.store.interactions.get(h.projectId, p.id))!.status).toBe('cancelled');
    expect(existsSync(p.file)).toBe(false);
    expect(h.model.requests[0]!.messages.some((m) => m.tool_calls?.length)).toBe(false);
  });

  it('a cancelled interaction cannot be answered afterwards → 409', async () => {
    const p = await paused();
    h.model.script({ text: 'ok' });
    await readJson(await repost(p.session, [...p.messages, { role: 'user', content: 'forget it' }]));
    await expectError(await repost(p.session, decide(p.messages, { approved: true })), 409, 'interaction-not-pending', /cancelled.*send a new message/);
    expect(existsSync(p.file)).toBe(false);
  });
});

/**
 * The reference implementation's native format (reference/agenta-agent-service.md §3): the paused
 * assistant message re-posted with `tool_call` and `tool_result` content blocks, the decision being
 * the result's output `{approved, interactionToken}`.
 */
describe('decisions as the reference content blocks', () => {
  /** The paused call as an assistant message of blocks, its tool_result block carrying `output`. */
  function asBlocks(messages: Array<Record<string, any>>, output: unknown) {
    const call = messages.find((m) => m.approval)!;
    return {
      role: 'assistant',
      content: [
        { type: 'text', text: 'I will write the file.' },
        { type: 'tool_call', toolCallId: call.tool_call_id, toolName: call.tool_name, input: call.input },
        { type: 'tool_result', toolCallId: call.tool_call_id, output },
      ],
    };
  }

  it('an approval runs the tool with the input shown and resolves the interaction in band', async () => {
    const p = await paused('from blocks');
    h.model.reset();
    const json = await readJson(await repost(p.session, [asBlocks(p.messages, { approved: true, interactionToken: p.id })]));
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(json.data.outputs.messages.at(-1)).toEqual({ role: 'assistant', content: 'The file is written.' });
    expect(await readFile(p.file, 'utf8')).toBe('from blocks');
    const record = await h.store.interactions.get(h.projectId, p.id);
    expect(record).toMatchObject({ status: 'resolved', answer: { approved: true }, resolution: { via: 'in_band', turn_id: json.turn_id } });
    // The model sees the assistant's text, then the call and its result.
    const seen = h.model.requests[0]!.messages;
    expect(seen.find((m) => m.role === 'assistant' && m.content === 'I will write the file.')).toBeDefined();
    expect(seen.find((m) => m.role === 'tool')?.content).toContain('a.txt');
  });

  it('a denial keeps its reason (the reference calls it message) and the tool does not run', async () => {
    const p = await paused();
    h.model.script({ text: 'Understood.' });
    h.model.reset();
    const json = await readJson(await repost(p.session, [asBlocks(p.messages, { approved: false, interactionToken: p.id, message: 'not today' })]));
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(existsSync(p.file)).toBe(false);
    expect(h.model.requests.at(-1)!.messages.find((m) => m.role === 'tool')?.content).toContain('not today');
    expect(await h.store.interactions.get(h.projectId, p.id)).toMatchObject({ status: 'resolved', answer: { approved: false, reason: 'not today' } });
  });

  it('a decision may answer a call made in an earlier message', async () => {
    const p = await paused('earlier call');
    const call = p.messages.find((m) => m.approval)!;
    const decision = { role: 'assistant', content: [{ type: 'tool_result', toolCallId: call.tool_call_id, output: { approved: true, interactionToken: p.id } }] };
    const json = await readJson(await repost(p.session, [{ ...call, approval: undefined }, decision]));
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(await readFile(p.file, 'utf8')).toBe('earlier call');
  });

  it('a decision without its interactionToken → 400 naming the path and what to send', async () => {
    const p = await paused();
    const res = await repost(p.session, [asBlocks(p.messages, { approved: true })]);
    await expectError(res, 400, 'invalid-messages', /interactionToken: the pending_interaction\.id .* at data\.inputs\.messages\[1\]\.content\[2\]\.output\.interactionToken$/);
    expect((await h.store.interactions.get(h.projectId, p.id))!.status).toBe('pending');
  });

  it("an unknown interactionToken → 400 naming the block that carries it", async () => {
    const p = await paused();
    const res = await repost(p.session, [asBlocks(p.messages, { approved: true, interactionToken: 'never-asked' })]);
    await expectError(res, 400, 'invalid-approval', /"never-asked".*\(data\.inputs\.messages\[1\]\.content\[2\]\)$/);
    expect((await h.store.interactions.get(h.projectId, p.id))!.status).toBe('pending');
  });

  it('a decision on a call no message makes → 400', async () => {
    const p = await paused();
    const decision = { role: 'assistant', content: [{ type: 'tool_result', toolCallId: 'call_nowhere', output: { approved: true, interactionToken: p.id } }] };
    await expectError(await repost(p.session, [decision]), 400, 'invalid-messages', /"call_nowhere".* at data\.inputs\.messages\[1\]\.content\[0\]$/);
  });

  it('blocks in a user message, or of an unknown type → 400 naming where', async () => {
    const p = await paused();
    const blocks = asBlocks(p.messages, { approved: true, interactionToken: p.id });
    await expectError(await repost(p.session, [{ ...blocks, role: 'user' }]), 400, 'invalid-messages', /assistant message at data\.inputs\.messages\[1\]\.role$/);
    const odd = { ...blocks, content: [...blocks.content, { type: 'image', url: 'x' }] };
    await expectError(await repost(p.session, [odd]), 400, 'invalid-messages', /"image".* at data\.inputs\.messages\[1\]\.content\[3\]\.type$/);
  });
});
