import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { builtin, expectError, type Harness, invokeBody, readJson, sid, startHarness, template, until } from '../support/harness.ts';

/**
 * An interaction takes one answer (design.md §4): a client tool's result given again, in band or
 * after one through the API, is a 409 as a second approval is; a record says how it was closed, so
 * a late answer is told what happened; and only a turn marks an interaction resolved.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

function api(route: string, body: unknown) {
  return fetch(`${h.url}${route}?project_id=${h.projectId}`, {
    method: 'POST',
    headers: { authorization: `ApiKey ${h.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}
const transition = (body: Record<string, unknown>) => api('/api/sessions/interactions/transition', body);
const record = (id: string) => h.store.interactions.get(h.projectId, id);
const turnsOf = (session: string) => h.store.turns.listForSession(h.projectId, session, { limit: 10 });

const pickColor = { type: 'client', name: 'pick_color', input_schema: { type: 'object' } };
const colorAgent = template({ tools: [pickColor] });
const first = [{ role: 'user', content: 'pick a colour' }];

/** A turn paused on `pick_color`; then the model answers with `then` (more replies may follow). */
async function pausedOnColor(then: object[] = [{ text: 'nice colour' }]) {
  const session = sid('second');
  h.model.script([{ toolCalls: [{ name: 'pick_color', input: {} }] }, ...then]);
  const body = await readJson(await h.invoke(invokeBody(first, colorAgent, { session_id: session })));
  expect(body.data.outputs.pending_interaction.kind).toBe('client_tool');
  const messages = body.data.outputs.messages as Array<Record<string, any>>;
  const call = messages.find((m) => m.tool_name === 'pick_color')!;
  const withResult = (content: string) => [...first, ...messages, { role: 'tool', tool_call_id: call.tool_call_id, content }];
  return { session, id: body.data.outputs.pending_interaction.id as string, messages, withResult, turnId: body.turn_id as string };
}

describe('a client tool answered a second time', () => {
  it('in band after in band → 409 naming the interaction; no turn runs and the first answer stands', async () => {
    const p = await pausedOnColor();
    const answered = await readJson(await h.invoke(invokeBody(p.withResult('green'), colorAgent, { session_id: p.session })));
    expect(answered.data.outputs.stop_reason).toBe('end_turn');
    expect(await record(p.id)).toMatchObject({ status: 'resolved', answer: { output: 'green' } });
    h.model.reset();

    const other = await h.invoke(invokeBody(p.withResult('red'), colorAgent, { session_id: p.session }));
    await expectError(other, 409, 'interaction-not-pending', new RegExp(`"${p.id}" is resolved.*data\\.inputs\\.messages\\[2\\].*GET /api/sessions/\\{session_id\\}`));
    // The same answer again is a second answer too, as a second approval is.
    await expectError(await h.invoke(invokeBody(p.withResult('green'), colorAgent, { session_id: p.session })), 409, 'interaction-not-pending', p.id);
    expect(h.model.requests).toHaveLength(0);
    expect(await turnsOf(p.session)).toHaveLength(2);
    expect(await record(p.id)).toMatchObject({ status: 'resolved', answer: { output: 'green' } });
  });

  it('in band after the API → 409; the same answer gets the continuation the API started', async () => {
    const p = await pausedOnColor([{ text: 'Blue it is.' }]);
    expect((await h.respond(p.id, { output: 'blue' })).status).toBe(200);
    await until(() => record(p.id), (r) => r?.status === 'resolved');
    const [continuation] = await until(() => turnsOf(p.session), (turns) => turns.length === 2 && turns[0]!.status === 'completed');

    const other = await h.invoke(invokeBody(p.withResult('red'), colorAgent, { session_id: p.session }));
    await expectError(other, 409, 'interaction-not-pending', new RegExp(`"${p.id}" is resolved.*differs`));
    const same = await readJson(await h.invoke(invokeBody(p.withResult('blue'), colorAgent, { session_id: p.session })));
    expect(same.turn_id).toBe(continuation!.id);
    expect(same.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Blue it is.' });
    expect(h.model.requests).toHaveLength(2);
    expect(await record(p.id)).toMatchObject({ answer: { output: 'blue' } });
  });

  it('an object answered through the API matches the same object re-posted with its keys in another order', async () => {
    const p = await pausedOnColor([{ text: 'Teal it is.' }]);
    expect((await h.respond(p.id, { output: { color: 'teal', shade: 'dark' } })).status).toBe(200);
    const [continuation] = await until(() => turnsOf(p.session), (turns) => turns.length === 2 && turns[0]!.status === 'completed');
    const same = await readJson(await h.invoke(invokeBody(p.withResult('{"shade":"dark","color":"teal"}'), colorAgent, { session_id: p.session })));
    expect(same.turn_id).toBe(continuation!.id);
  });

  it("a different answer while the API's continuation runs is refused without taking the session over", async () => {
    const p = await pausedOnColor([{ text: 'Blue, slowly.', latencyMs: 600 }]);
    expect((await h.respond(p.id, { output: 'blue' })).status).toBe(200);
    await until(() => turnsOf(p.session), (turns) => turns.length === 2);
    const other = await h.invoke(invokeBody(p.withResult('red'), colorAgent, { session_id: p.session }), { headers: { 'x-ag-session-control': 'force' } });
    await expectError(other, 409, 'interaction-not-pending', p.id);
    const [continuation] = await until(() => turnsOf(p.session), (turns) => turns[0]!.status !== 'running');
    expect(continuation).toMatchObject({ status: 'completed', stop_reason: 'end_turn' });
  });

  // A re-post that looked before the API's answer landed and runs after it: the same answer gets
  // the API's continuation, whether it still holds the session or has taken the answer up and ended.
  it.each([
    ['still runs', 600],
    ['has ended', 0],
  ])('the same answer through the API at the same instant, while its continuation %s, gets that continuation', async (_, latencyMs) => {
    const p = await pausedOnColor([{ text: 'Blue at once.', latencyMs }]);
    const interactions = h.store.interactions;
    const look = interactions.ofToolCalls;
    let continuationId: string | undefined;
    interactions.ofToolCalls = async (...args) => {
      const seen = await look(...args);
      interactions.ofToolCalls = look;
      expect((await h.respond(p.id, { output: 'blue' })).status).toBe(200);
      const [turn] = await until(() => turnsOf(p.session), (turns) => turns.length === 2 && (latencyMs > 0 || turns[0]!.status === 'completed'));
      continuationId = turn!.id;
      return seen;
    };
    try {
      const same = await readJson(await h.invoke(invokeBody(p.withResult('blue'), colorAgent, { session_id: p.session })));
      expect(same.turn_id).toBe(continuationId);
      expect(same.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Blue at once.' });
    } finally {
      interactions.ofToolCalls = look;
    }
    expect(h.model.requests).toHaveLength(2);
    expect(await turnsOf(p.session)).toHaveLength(2);
  });

  it('the results of an earlier pause are history: a continuation that paused again is answered in band', async () => {
    const p = await pausedOnColor([{ toolCalls: [{ name: 'pick_color', input: { again: true } }] }, { text: 'two colours' }]);
    const second = await readJson(await h.invoke(invokeBody(p.withResult('green'), colorAgent, { session_id: p.session })));
    expect(second.data.outputs.stop_reason).toBe('paused');
    const call = (second.data.outputs.messages as Array<Record<string, any>>).find((m) => m.tool_name === 'pick_color')!;
    const history = [...p.withResult('green'), ...second.data.outputs.messages, { role: 'tool', tool_call_id: call.tool_call_id, content: 'red' }];
    const done = await readJson(await h.invoke(invokeBody(history, colorAgent, { session_id: p.session })));
    expect(done.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'two colours' });
    expect(await record(second.data.outputs.pending_interaction.id)).toMatchObject({ status: 'resolved', answer: { output: 'red' } });
  });
});

const writeAgent = template({ tools: [builtin('write')], mode: 'ask' });

async function pausedOnWrite() {
  const session = sid('gate');
  h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'out.txt', content: 'x' } }] }, { text: 'written' }]);
  const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write it' }], writeAgent, { session_id: session })));
  expect(body.data.outputs.stop_reason).toBe('paused');
  return { session, id: body.data.outputs.pending_interaction.id as string, messages: body.data.outputs.messages as unknown[] };
}

describe('a late answer is told how the interaction was closed', () => {
  it('cancelled through transition: says so, not that a newer turn abandoned it', async () => {
    const { id } = await pausedOnWrite();
    const moved = await (await transition({ interaction_id: id, status: 'cancelled' })).json();
    expect(moved).toMatchObject({ status: 'cancelled', resolution: { via: 'transition' } });
    const late = await expectError(await h.respond(id, { approved: true }), 409, 'interaction-not-pending', /is cancelled.*cancelled through the API \(POST \/api\/sessions\/interactions\/transition\).*send a new message/);
    expect(late.status.message).not.toMatch(/newer turn/);
  });

  it('cancelled through transition with a resolution of its own: that resolution is kept, and says so too', async () => {
    const { id } = await pausedOnWrite();
    expect(await (await transition({ interaction_id: id, status: 'cancelled', resolution: { reason: 'user left' } })).json()).toMatchObject({ resolution: { reason: 'user left' } });
    await expectError(await h.respond(id, { approved: true }), 409, 'interaction-not-pending', /cancelled through the API/);
  });

  it('abandoned by a new message: a newer turn of the session abandoned it', async () => {
    const { session, id, messages } = await pausedOnWrite();
    h.model.script({ text: 'something else then' });
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write it' }, ...messages, { role: 'user', content: 'never mind' }], writeAgent, { session_id: session })));
    expect(await record(id)).toMatchObject({ status: 'cancelled', resolution: null });
    await expectError(await h.respond(id, { approved: true }), 409, 'interaction-not-pending', /is cancelled.*a newer turn of the session abandoned it/);
  });
});

describe('transition to resolved', () => {
  it('without an answer is refused for a pending approval, which stays answerable', async () => {
    const { id } = await pausedOnWrite();
    await expectError(await transition({ interaction_id: id, status: 'resolved' }), 409, 'interaction-not-pending', /cannot move from pending to resolved.*\/respond/);
    expect(await record(id)).toMatchObject({ status: 'pending', answer: null });
  });

  it.each([
    ['the reference’s settlement', (call: string) => ({ verdict: 'approved', tool_call_id: call })],
    ['an answer', () => ({ approved: true })],
  ])('with %s answers a pending approval: the tool runs, and the same settlement again is a 200, another a 409', async (_name, resolution) => {
    const { session, id } = await pausedOnWrite();
    const call = (await record(id))!.tool_call_id;
    const moved = await transition({ interaction_id: id, status: 'resolved', resolution: resolution(call) });
    expect(moved.status).toBe(200);
    await until(() => turnsOf(session), (turns) => turns.length === 2 && turns[0]!.status === 'completed');
    expect(readFileSync(path.join(h.sessionDir(session), 'out.txt'), 'utf8')).toBe('x');
    expect(await record(id)).toMatchObject({ status: 'resolved', answer: { approved: true } });
    expect((await transition({ interaction_id: id, status: 'resolved', resolution: resolution(call) })).status).toBe(200);
    await expectError(await transition({ interaction_id: id, status: 'resolved', resolution: { verdict: 'denied', tool_call_id: call } }), 409, 'interaction-not-pending');
  });

  it('is refused for a client tool, and for an answered one, whose turn continues by itself', async () => {
    const p = await pausedOnColor([{ text: 'Blue, slowly.', latencyMs: 300 }]);
    await expectError(await transition({ interaction_id: p.id, status: 'resolved', resolution: { output: 'blue' } }), 409, 'interaction-not-pending', /pending to resolved/);
    expect((await h.respond(p.id, { output: 'blue' })).status).toBe(200);
    const answered = await transition({ interaction_id: p.id, status: 'resolved' });
    // Answered: refused while its continuation has still to take the answer up, and after (resolved is final).
    await expectError(answered, 409, 'interaction-not-pending', /cannot move from (responded|resolved) to resolved/);
    const [continuation] = await until(() => turnsOf(p.session), (turns) => turns.length === 2 && turns[0]!.status === 'completed');
    expect(await record(p.id)).toMatchObject({ status: 'resolved', resolution: { via: 'out_of_band', turn_id: continuation!.id } });
  });
});

describe('a forced re-post of an answer already given in band', () => {
  it('is refused before it takes the session: the turn that answer started runs on to its end', async () => {
    const session = sid('gate-force');
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'out.txt', content: 'x' } }] }, { text: 'written', latencyMs: 800 }]);
    const paused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write it' }], writeAgent, { session_id: session })));
    const id = paused.data.outputs.pending_interaction.id as string;
    const [call] = paused.data.outputs.messages as Array<Record<string, unknown>>;
    const answered = invokeBody([{ role: 'user', content: 'write it' }, { ...call, approval: { id, approved: true } }], writeAgent, { session_id: session });
    const first = h.invoke(answered);
    await until(() => record(id), (r) => r?.status === 'resolved');
    await expectError(await h.invoke(answered, { headers: { 'x-ag-session-control': 'force' } }), 409, 'interaction-not-pending');
    const done = await readJson(await first);
    expect(done.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'written' });
    expect((await turnsOf(session))[0]).toMatchObject({ status: 'completed' });
  });
});

describe('an answer through the API racing a different one in band', () => {
  it('the in-band one took the session and then lost the interaction: the continuation runs once the session is free', async () => {
    const { session, id, messages } = await pausedOnWrite();
    const { interactions, leases } = h.store;
    const { listPending } = interactions;
    const { acquire } = leases;
    const refused = Promise.withResolvers<void>();
    leases.acquire = async (input) => {
      const got = await acquire(input);
      if (!got.acquired) refused.resolve();
      return got;
    };
    // The in-band re-post holds the session and is about to read the records when the API's answer
    // lands, and that answer's continuation is refused the session.
    interactions.listPending = async (...args) => {
      interactions.listPending = listPending;
      expect((await h.respond(id, { approved: true })).status).toBe(200);
      await refused.promise;
      return listPending(...args);
    };
    try {
      const denied = [{ role: 'user', content: 'write it' }, ...messages.map((m: any) => (m.approval?.id === id ? { ...m, approval: { id, approved: false } } : m))];
      await expectError(await h.invoke(invokeBody(denied, writeAgent, { session_id: session })), 409, 'interaction-not-pending', id);
    } finally {
      interactions.listPending = listPending;
      leases.acquire = acquire;
    }
    const [continuation] = await until(() => turnsOf(session), (turns) => turns.length === 2 && turns[0]!.status === 'completed');
    expect(await record(id)).toMatchObject({ status: 'resolved', answer: { approved: true }, resolution: { via: 'out_of_band', turn_id: continuation!.id } });
    expect(readFileSync(path.join(h.sessionDir(session), 'out.txt'), 'utf8')).toBe('x');
  });

  it('the in-band one lost the interaction as it claimed it: its turn, recorded as it began, is gone; the continuation runs', async () => {
    const { session, id, messages } = await pausedOnWrite();
    const { interactions } = h.store;
    const { transitionAll } = interactions;
    // The API's answer lands between the in-band turn's start (its row written) and its claim.
    interactions.transitionAll = async (...args) => {
      interactions.transitionAll = transitionAll;
      expect((await h.respond(id, { approved: true })).status).toBe(200);
      return transitionAll(...args);
    };
    try {
      const denied = [{ role: 'user', content: 'write it' }, ...messages.map((m: any) => (m.approval?.id === id ? { ...m, approval: { id, approved: false } } : m))];
      await expectError(await h.invoke(invokeBody(denied, writeAgent, { session_id: session })), 409, 'interaction-not-pending', id);
    } finally {
      interactions.transitionAll = transitionAll;
    }
    const [continuation] = await until(() => turnsOf(session), (turns) => turns[0]?.status === 'completed');
    expect((await turnsOf(session)).map((t) => t.status)).toEqual(['completed', 'paused']);
    expect(await record(id)).toMatchObject({ status: 'resolved', resolution: { via: 'out_of_band', turn_id: continuation!.id } });
  });
});
