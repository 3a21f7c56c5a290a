import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { builtin, expectError, type Harness, invokeBody, readJson, sid, startHarness, template, until } from '../support/harness.ts';

let h: Harness;
let viewerKey: string;
let otherKey: string;
let otherProject: string;
beforeAll(async () => {
  h = await startHarness();
  viewerKey = (await h.store.apiKeys.create(h.projectId, 'viewer')).key;
  const other = await h.store.projects.ensure('other');
  otherProject = other.id;
  otherKey = (await h.store.apiKeys.create(other.id, 'editor')).key;
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

function api(method: string, route: string, body?: unknown, auth: { key?: string; project?: string } = {}) {
  return fetch(`${h.url}${route}?project_id=${auth.project ?? h.projectId}`, {
    method,
    headers: { authorization: `ApiKey ${auth.key ?? h.apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}
const respond = (id: string, answer: unknown, auth?: { key?: string; project?: string }) => api('POST', `/api/sessions/interactions/${id}/respond`, { answer }, auth);

const writeAgent = template({ tools: [builtin('write')], mode: 'ask' });

/** Runs a turn that pauses on one `write`; returns the session and the pending interaction's id. */
async function pauseOnWrite(content = 'from the api'): Promise<{ session: string; id: string; turnId: string }> {
  const session = sid('oob');
  h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'out.txt', content } }] }, { text: 'written, thanks' }]);
  const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write it' }], writeAgent, { session_id: session })));
  expect(body.data.outputs.stop_reason).toBe('paused');
  return { session, id: body.data.outputs.pending_interaction.id, turnId: body.turn_id };
}

const turnsOf = (session: string) => h.store.turns.listForSession(h.projectId, session, { limit: 10 });
const settled = (session: string) => until(() => turnsOf(session), (turns) => turns.length >= 2 && turns[0]!.status !== 'running');

describe('interactions API', () => {
  it('answers an approval out of band and the paused turn continues by itself', async () => {
    const { session, id, turnId } = await pauseOnWrite();
    const listed = await (await api('POST', '/api/sessions/interactions/query', { session_id: session })).json();
    expect(listed).toMatchObject({ count: 1, interactions: [{ id, kind: 'user_approval', status: 'pending', turn_id: turnId, session_id: session }] });
    expect(listed.interactions[0].request).toMatchObject({ tool: 'write', args: { path: 'out.txt', content: 'from the api' } });
    expect(listed.interactions[0]).not.toHaveProperty('state');

    const res = await respond(id, { approved: true });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id, status: 'responded', answer: { approved: true } });

    const [continuation] = await settled(session);
    expect(continuation).toMatchObject({ status: 'completed', stop_reason: 'end_turn', request: { continues: turnId, via: 'out_of_band' } });
    expect(JSON.stringify(continuation!.output)).toContain('written, thanks');
    expect(readFileSync(path.join(h.sessionDir(session), 'out.txt'), 'utf8')).toBe('from the api');
    const record = await (await api('GET', `/api/sessions/interactions/${id}`)).json();
    expect(record).toMatchObject({ status: 'resolved', resolution: { via: 'out_of_band', turn_id: continuation!.id } });
    // The continuation continues the paused turn's trace.
    const paused = (await turnsOf(session))[1]!;
    expect(continuation!.trace_id).toBe(paused.trace_id);
  });

  it("reads the paused turn's stored conversation once for an answer and its continuation", async () => {
    const { session, id } = await pauseOnWrite();
    const reads: string[] = [];
    const get = h.store.pausedStates.get;
    h.store.pausedStates.get = (projectId, turnId) => {
      reads.push(turnId);
      return get(projectId, turnId);
    };
    try {
      expect((await respond(id, { approved: true })).status).toBe(200);
      const [continuation] = await settled(session);
      expect(continuation).toMatchObject({ status: 'completed', stop_reason: 'end_turn' });
    } finally {
      h.store.pausedStates.get = get;
    }
    expect(reads).toHaveLength(1);
  });

  it('a denial reaches the model and nothing runs', async () => {
    const { session, id } = await pauseOnWrite();
    expect((await respond(id, { approved: false, reason: 'not now' })).status).toBe(200);
    await settled(session);
    expect(existsSync(path.join(h.sessionDir(session), 'out.txt'))).toBe(false);
    expect(JSON.stringify(h.model.requests.at(-1)!.messages)).toContain('not now');
  });

  it('a client tool answered through the API delivers its output to the model', async () => {
    const session = sid('client');
    const agent = template({ tools: [{ type: 'client', name: 'pick_color', input_schema: { type: 'object' } }] });
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: {} }] }, { text: 'nice color' }]);
    const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'pick' }], agent, { session_id: session })));
    const pending = body.data.outputs.pending_interaction;
    expect(pending.kind).toBe('client_tool');
    await expectError(await respond(pending.id, { approved: true }), 400, 'invalid-request', /client_tool answer/);
    expect((await respond(pending.id, { output: { color: 'teal' } })).status).toBe(200);
    const [continuation] = await settled(session);
    expect(JSON.stringify(h.model.requests.at(-1)!.messages)).toContain('teal');
    // No message the caller holds has the answer, so the continuation's output begins with it, and
    // the conversation posted back with the next message gives the model the call and its answer.
    const call = body.data.outputs.messages.find((m: { tool_name?: string }) => m.tool_name === 'pick_color');
    const continued = (continuation!.output as { messages: unknown[] }).messages;
    expect(continued[0]).toEqual({ role: 'tool', content: '{"color":"teal"}', tool_call_id: call.tool_call_id, is_error: false });
    expect(continued.at(-1)).toMatchObject({ role: 'assistant', content: 'nice color' });
    h.model.script({ text: 'teal again' });
    const conversation = [{ role: 'user', content: 'pick' }, ...body.data.outputs.messages, ...continued, { role: 'user', content: 'and now?' }];
    expect((await h.invoke(invokeBody(conversation, agent, { session_id: session }))).status).toBe(200);
    const sent = JSON.stringify(h.model.requests.at(-1)!.messages);
    expect(sent).toContain(call.tool_call_id);
    expect(sent).toContain('teal');
  });

  it("two client tools of one step answered through the API: the continuation's model reads one step of two calls, as the conversation posted back does", async () => {
    const session = sid('client-two');
    const client = (name: string) => ({ type: 'client', name, input_schema: { type: 'object' } });
    const agent = template({ tools: [client('pick_color'), client('pick_size')] });
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: {} }, { name: 'pick_size', input: {} }] }, { text: 'red and big' }, { text: 'still' }]);
    const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'pick' }], agent, { session_id: session })));
    const paused = body.data.outputs.messages as { tool_call_id: string; tool_name: string }[];
    const pending = (await (await api('POST', '/api/sessions/interactions/query', { session_id: session })).json()).interactions as { id: string; request: { tool: string } }[];
    // Answered in the other order than the calls were made.
    for (const tool of ['pick_size', 'pick_color']) {
      expect((await respond(pending.find((p) => p.request.tool === tool)!.id, { output: tool === 'pick_color' ? 'red' : 'big' })).status).toBe(200);
    }
    const [continuation] = await settled(session);
    const shape = (messages: { role: string; tool_calls?: { id: string }[]; tool_call_id?: string; content?: unknown }[]) =>
      messages.map((m) => (m.tool_calls ? `calls ${m.tool_calls.map((c) => c.id).join(' ')}` : m.tool_call_id ? `result ${m.tool_call_id} ${String(m.content)}` : `${m.role} ${String(m.content)}`));
    const [color, size] = paused.map((m) => m.tool_call_id);
    const step = [`calls ${color} ${size}`, `result ${color} red`, `result ${size} big`];
    expect(shape(h.model.requests[1]!.messages).slice(1)).toEqual(['user pick', ...step]);
    const continued = (continuation!.output as { messages: { tool_call_id?: string }[] }).messages;
    expect(continued.slice(0, 2).map((m) => m.tool_call_id)).toEqual([color, size]);

    const conversation = [{ role: 'user', content: 'pick' }, ...paused, ...continued, { role: 'user', content: 'sure?' }];
    expect((await h.invoke(invokeBody(conversation, agent, { session_id: session }))).status).toBe(200);
    expect(shape(h.model.requests[2]!.messages).slice(1)).toEqual(['user pick', ...step, 'assistant red and big', 'user sure?']);
  });

  it('of two concurrent answers exactly one wins; later answers get 409', async () => {
    const { session, id } = await pauseOnWrite();
    const results = await Promise.all([respond(id, { approved: true }), respond(id, { approved: false })]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    await settled(session);
    // A late answer is told where the outcome is, so a refreshed page is not left stuck.
    await expectError(await respond(id, { approved: true }), 409, 'interaction-not-pending', /is resolved.*GET \/api\/sessions\/\{session_id\}/);
  });

  it('an interaction that is not pending is a 409 whatever the answer holds (spec §3.1): its kind decides no more', async () => {
    const { session, id } = await pauseOnWrite();
    // While pending, an answer that is not an approval's is a 400 naming what one is.
    await expectError(await respond(id, { output: 'not an approval' }), 400, 'invalid-request', /approved/);
    expect((await respond(id, { approved: true })).status).toBe(200);
    await settled(session);
    for (const answer of [{ approved: false }, {}, { output: 'not an approval' }]) {
      await expectError(await respond(id, answer), 409, 'interaction-not-pending', /is resolved/);
    }
    // The reference's way of answering, through transition, is told the same.
    await expectError(await api('POST', '/api/sessions/interactions/transition', { interaction_id: id, status: 'responded', resolution: { output: 'x' } }), 409, 'interaction-not-pending');
  });

  it('waits for every gated call of a turn before continuing', async () => {
    const session = sid('two');
    h.model.script([
      { toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'a' } }, { name: 'write', input: { path: 'b.txt', content: 'b' } }] },
      { text: 'both done' },
    ]);
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'two files' }], writeAgent, { session_id: session })));
    const { interactions } = await (await api('POST', '/api/sessions/interactions/query', { session_id: session, status: 'pending' })).json();
    expect(interactions).toHaveLength(2);
    await respond(interactions[0].id, { approved: true });
    await new Promise((r) => setTimeout(r, 150));
    expect(await turnsOf(session)).toHaveLength(1);
    await respond(interactions[1].id, { approved: true });
    await settled(session);
    expect(readFileSync(path.join(h.sessionDir(session), 'a.txt'), 'utf8')).toBe('a');
    expect(readFileSync(path.join(h.sessionDir(session), 'b.txt'), 'utf8')).toBe('b');
  });

  it('a new turn abandons a partly answered pause: the answered interaction is cancelled too and never continued', async () => {
    const session = sid('abandon');
    h.model.script([
      { toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'a' } }, { name: 'write', input: { path: 'b.txt', content: 'b' } }] },
      { text: 'something else then' },
    ]);
    const paused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'two files' }], writeAgent, { session_id: session })));
    const [a, b] = (await (await api('POST', '/api/sessions/interactions/query', { session_id: session })).json()).interactions;
    expect((await respond(a.id, { approved: true })).status).toBe(200);
    const history = [{ role: 'user', content: 'two files' }, ...paused.data.outputs.messages, { role: 'user', content: 'never mind' }];
    await readJson(await h.invoke(invokeBody(history, writeAgent, { session_id: session })));
    const after = await (await api('POST', '/api/sessions/interactions/query', { session_id: session })).json();
    expect(after.interactions.map((r: { id: string; status: string }) => [r.id, r.status])).toEqual([
      [a.id, 'cancelled'],
      [b.id, 'cancelled'],
    ]);
    // What a restarted server would pick up and continue.
    expect((await h.store.interactions.listByStatus('responded', 1000)).map((r) => r.id)).not.toContain(a.id);
    expect(existsSync(path.join(h.sessionDir(session), 'a.txt'))).toBe(false);
  });

  it('transition allows only the legal moves', async () => {
    const { id } = await pauseOnWrite();
    await expectError(await api('POST', '/api/sessions/interactions/transition', { interaction_id: id, status: 'responded' }), 409, 'interaction-not-pending', /respond/);
    const moved = await api('POST', '/api/sessions/interactions/transition', { interaction_id: id, status: 'cancelled', resolution: { reason: 'user left' } });
    expect(await moved.json()).toMatchObject({ status: 'cancelled', resolution: { reason: 'user left' } });
    await expectError(await api('POST', '/api/sessions/interactions/transition', { interaction_id: id, status: 'resolved' }), 409);
    await expectError(await respond(id, { approved: true }), 409, 'interaction-not-pending', /is cancelled.*send a new message/);
    await expectError(await api('POST', '/api/sessions/interactions/transition', { interaction_id: 'nope', status: 'cancelled' }), 404, 'not-found');
    await expectError(await api('POST', '/api/sessions/interactions/transition', { interaction_id: id, status: 'done' }), 400, 'invalid-request', /status/);
  });

  it('queries by turn, kind and status, paged', async () => {
    const a = await pauseOnWrite();
    const b = await pauseOnWrite();
    const byTurn = await (await api('POST', '/api/sessions/interactions/query', { turn_id: b.turnId })).json();
    expect(byTurn.interactions.map((r: { id: string }) => r.id)).toEqual([b.id]);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await (await api('POST', '/api/sessions/interactions/query', { kind: 'user_approval', status: ['pending'], limit: 1, ...(cursor ? { cursor } : {}) })).json();
      expect(page.interactions.length).toBeLessThanOrEqual(1);
      seen.push(...page.interactions.map((r: { id: string }) => r.id));
      cursor = page.next;
    } while (cursor);
    expect(seen).toEqual(expect.arrayContaining([a.id, b.id]));
    expect(new Set(seen).size).toBe(seen.length);
    await expectError(await api('POST', '/api/sessions/interactions/query', { colour: 'red' }), 400, 'invalid-request', /colour/);
  });

  it("lists newest first with order descending, pages that way, and keeps a window of creation times (the reference's windowing)", async () => {
    const recordOf = async (turnId: string) => (await (await api('POST', '/api/sessions/interactions/query', { turn_id: turnId })).json()).interactions[0];
    const a = await recordOf((await pauseOnWrite()).turnId);
    const b = await recordOf((await pauseOnWrite()).turnId);
    const c = await recordOf((await pauseOnWrite()).turnId);
    const ids = [a.id, b.id, c.id];
    const window = { oldest: a.created_at, newest: c.created_at };
    const list = async (body: Record<string, unknown>) => (await (await api('POST', '/api/sessions/interactions/query', body)).json()) as { interactions: Array<{ id: string }>; next?: string };
    const mine = (page: { interactions: Array<{ id: string }> }) => page.interactions.map((r) => r.id).filter((id) => ids.includes(id));

    expect(mine(await list({ ...window, limit: 200 }))).toEqual(ids);
    expect(mine(await list({ ...window, order: 'descending', limit: 200 }))).toEqual([...ids].reverse());
    // Paged one at a time, newest first, in the reference's shape.
    const seen: string[] = [];
    let next: string | undefined;
    do {
      const page = await list({ windowing: { ...window, order: 'descending', limit: 1, ...(next ? { next } : {}) } });
      seen.push(...page.interactions.map((r) => r.id));
      next = page.next;
    } while (next);
    expect(seen.filter((id) => ids.includes(id))).toEqual([...ids].reverse());
    // Both bounds are included; a window after the last record holds none of them.
    expect(mine(await list({ oldest: b.created_at, newest: b.created_at }))).toEqual([b.id]);
    expect(mine(await list({ windowing: { oldest: new Date(Date.parse(c.created_at) + 1).toISOString() } }))).toEqual([]);
    await expectError(await api('POST', '/api/sessions/interactions/query', { newest: 'yesterday' }), 400, 'invalid-request', /newest/);
    await expectError(await api('POST', '/api/sessions/interactions/query', { order: 'sideways' }), 400, 'invalid-request', /order/);
  });

  it("accepts the reference's request shapes and carries its {count, interaction} reply", async () => {
    const a = await pauseOnWrite();
    const listed = await (await api('POST', '/api/sessions/interactions/query', { query: { session_id: a.session, status: 'pending' }, windowing: { limit: 10 } })).json();
    expect(listed.interactions.map((r: { id: string }) => r.id)).toEqual([a.id]);
    const actionable = await (await api('POST', '/api/sessions/interactions/query', { query: { session_id: a.session, actionable_only: true } })).json();
    expect(actionable.count).toBe(1);
    await expectError(await api('POST', '/api/sessions/interactions/query', { query: { colour: 'red' } }), 400, 'invalid-request', /query\.colour|colour/);

    const read = await (await api('GET', `/api/sessions/interactions/${a.id}`)).json();
    expect(read).toMatchObject({ id: a.id, status: 'pending', count: 1, interaction: { id: a.id, status: 'pending' } });

    await expectError(await respond(a.id, { approved: true, tool_call_id: 'call_other' }), 400, 'invalid-request', /tool_call_id/);
    const answered = await (await respond(a.id, { approved: false, tool_call_id: read.request.tool_call_id, message: 'not that file' })).json();
    expect(answered.interaction).toMatchObject({ status: 'responded', answer: { approved: false, reason: 'not that file' } });
    expect(answered.interaction.answer).not.toHaveProperty('tool_call_id');
    await settled(a.session);
    expect(JSON.stringify(h.model.requests.at(-1)!.messages)).toContain('not that file');
    const after = await (await api('POST', '/api/sessions/interactions/query', { query: { session_id: a.session, actionable_only: true } })).json();
    expect(after.count).toBe(0);

    const b = await pauseOnWrite();
    await expectError(await api('POST', '/api/sessions/interactions/transition', { session_id: 'elsewhere', token: b.id, status: 'cancelled' }), 404, 'not-found');
    const moved = await (await api('POST', '/api/sessions/interactions/transition', { session_id: b.session, token: b.id, status: 'cancelled' })).json();
    expect(moved).toMatchObject({ count: 1, interaction: { id: b.id, status: 'cancelled' } });
    await expectError(await api('POST', '/api/sessions/interactions/transition', { status: 'cancelled' }), 400, 'invalid-request', /interaction_id/);
  });

  it('keeps every project to itself and every role to its rights', async () => {
    const { id } = await pauseOnWrite();
    await expectError(await api('GET', `/api/sessions/interactions/${id}`, undefined, { key: otherKey, project: otherProject }), 404, 'not-found');
    await expectError(await respond(id, { approved: true }, { key: otherKey, project: otherProject }), 404, 'not-found');
    const other = await (await api('POST', '/api/sessions/interactions/query', {}, { key: otherKey, project: otherProject })).json();
    expect(other.interactions).toEqual([]);
    await expectError(await api('GET', `/api/sessions/interactions/${id}`, undefined, { key: otherKey }), 403, 'forbidden');
    expect((await api('GET', `/api/sessions/interactions/${id}`, undefined, { key: viewerKey })).status).toBe(200);
    await expectError(await respond(id, { approved: true }, { key: viewerKey }), 403, 'forbidden');
    await expectError(await fetch(`${h.url}/api/sessions/interactions/${id}?project_id=${h.projectId}`), 401, 'unauthenticated');
  });
});

describe('continuations', () => {
  it('a continuation may pause again; each pause is answered the same way', async () => {
    const session = sid('again');
    h.model.script([
      { toolCalls: [{ name: 'write', input: { path: 'one.txt', content: '1' } }] },
      { toolCalls: [{ name: 'write', input: { path: 'two.txt', content: '2' } }] },
      { text: 'both files written' },
    ]);
    const references = { workflow: { slug: 'writer' } };
    const first = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write two' }], writeAgent, { session_id: session, references })));
    expect(await h.store.pausedStates.get(h.projectId, first.turn_id)).toBeDefined();
    await respond(first.data.outputs.pending_interaction.id, { approved: true });
    const second = await until(() => turnsOf(session), (turns) => turns.length === 2 && turns[0]!.status === 'paused');
    const pendingAgain = (second[0]!.output as { pending_interaction: { id: string } }).pending_interaction;
    expect(second[0]!.request).toMatchObject({ references });
    // The first pause is settled: only the second's state is kept.
    expect(await h.store.pausedStates.get(h.projectId, first.turn_id)).toBeUndefined();
    expect(await h.store.pausedStates.get(h.projectId, second[0]!.id)).toBeDefined();
    await respond(pendingAgain.id, { approved: true });
    const third = await until(() => turnsOf(session), (turns) => turns.length === 3 && turns[0]!.status === 'completed');
    expect(await h.store.pausedStates.get(h.projectId, second[0]!.id)).toBeUndefined();
    expect(JSON.stringify(third[0]!.output)).toContain('both files written');
    expect(readFileSync(path.join(h.sessionDir(session), 'one.txt'), 'utf8')).toBe('1');
    expect(readFileSync(path.join(h.sessionDir(session), 'two.txt'), 'utf8')).toBe('2');
  });
});
