import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SessionView } from '../../src/contract/sessions.ts';
import { expectError, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { getSession, okJson, otherProject, viewerOf, waitFor, type Caller } from './client.ts';

/** GET /api/sessions/{session_id}: the session, its live turn and its turns, newest first, paged. */

let h: Harness;
let stranger: Caller;
beforeAll(async () => {
  h = await startHarness();
  stranger = await otherProject(h);
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

const agent = template();
const say = (session: string, text: string, extra: Record<string, unknown> = {}) =>
  h.invoke(invokeBody([{ role: 'user', content: text }], agent, { session_id: session, ...extra }));

/** Reads a session reply and checks it is exactly the contract's SessionView, nothing more. */
async function view(res: Response): Promise<SessionView> {
  const body = await okJson(res);
  expect(SessionView.parse(body)).toEqual(body);
  return body as SessionView;
}

async function runTurns(session: string, texts: string[]): Promise<any[]> {
  const replies = [];
  for (const text of texts) {
    h.model.script({ text: `reply to ${text}`, usage: { input: 11, output: 4 } });
    replies.push(await readJson(await say(session, text, { tags: { n: text } })));
  }
  return replies;
}

describe('reading a session', () => {
  it('returns the session and its turns newest first, with outputs, usage, trace ids and times', async () => {
    const session = sid('read');
    const replies = await runTurns(session, ['one', 'two']);
    const res = await getSession(h, session);
    expect(res.headers.get('x-ag-session-id')).toBe(session);
    const body = await view(res);

    expect(body.session).toEqual({ id: session, project_id: h.projectId, created_at: expect.any(String), updated_at: expect.any(String) });
    expect(body.live_turn).toBeUndefined();
    expect(body.next).toBeUndefined();
    expect(body.turns.map((t) => t.id)).toEqual([replies[1].turn_id, replies[0].turn_id]);
    for (const [i, turn] of body.turns.entries()) {
      const reply = replies[1 - i];
      expect(turn).toMatchObject({
        status: 'completed',
        stop_reason: 'end_turn',
        trace_id: reply.trace_id,
        span_id: reply.span_id,
        usage: { input: 11, output: 4, total: 15 },
        request: { version: '2025.07.14', tags: { n: i === 0 ? 'two' : 'one' } },
      });
      expect(turn.outputs).toEqual({ messages: reply.data.outputs.messages });
      expect(Date.parse(turn.ended_at!)).toBeGreaterThanOrEqual(Date.parse(turn.started_at));
      expect(turn.error).toBeUndefined();
    }
    expect((body.turns[0]!.outputs!.messages.at(-1) as { content: string }).content).toBe('reply to two');
  });

  it('pages with limit and next, reaching every turn exactly once', async () => {
    const session = sid('pages');
    const replies = await runTurns(session, ['a', 'b', 'c', 'd', 'e']);
    const expected = replies.map((r) => r.turn_id).reverse();

    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const body = await view(await getSession(h, session, { query: { limit: '1', ...(cursor ? { cursor } : {}) } }));
      expect(body.turns).toHaveLength(1);
      seen.push(body.turns[0]!.id);
      cursor = body.next;
      pages++;
    } while (cursor !== undefined && pages < 20);
    expect(seen).toEqual(expected);
    expect(pages).toBe(5);

    const two = await view(await getSession(h, session, { query: { limit: '2' } }));
    expect(two.turns.map((t) => t.id)).toEqual(expected.slice(0, 2));
    const rest = await view(await getSession(h, session, { query: { limit: '200', cursor: two.next! } }));
    expect(rest.turns.map((t) => t.id)).toEqual(expected.slice(2));
    expect(rest.next).toBeUndefined();
    // Default page size is 20, so one page holds all five.
    expect((await view(await getSession(h, session))).turns).toHaveLength(5);
  });

  it('shows the live turn while it runs and not after; the running turn is listed as running', async () => {
    const session = sid('live');
    h.model.script({ text: 'slowly', latencyMs: 800 });
    const pending = say(session, 'go');
    await waitFor(async () => h.model.requests.length >= 1, 'model call');

    const during = await view(await getSession(h, session));
    expect(during.live_turn).toEqual({ id: expect.any(String), started_at: expect.any(String) });
    expect(during.turns[0]).toMatchObject({ id: during.live_turn!.id, status: 'running' });
    expect(during.turns[0]!.ended_at).toBeUndefined();
    expect(during.turns[0]!.outputs).toBeUndefined();

    const reply = await readJson(await pending);
    expect(reply.turn_id).toBe(during.live_turn!.id);
    const after = await view(await getSession(h, session));
    expect(after.live_turn).toBeUndefined();
    expect(after.turns[0]).toMatchObject({ id: reply.turn_id, status: 'completed', stop_reason: 'end_turn' });
  });

  it('keeps a paused turn’s pending interaction and a failed turn’s error', async () => {
    const session = sid('paused');
    h.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }]);
    const paused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'ls' }], template({ tools: [{ type: 'builtin', name: 'ls' }], mode: 'ask' }), { session_id: session })));
    h.model.script({ error: { status: 500, message: 'the model broke' } });
    const failed = await say(session, 'again');
    expect(failed.status).toBeGreaterThanOrEqual(500);

    const body = await view(await getSession(h, session));
    expect(body.turns[1]).toMatchObject({ status: 'paused', stop_reason: 'paused' });
    expect(body.turns[1]!.outputs!.pending_interaction).toEqual(paused.data.outputs.pending_interaction);
    expect(body.turns[0]).toMatchObject({ status: 'failed', stop_reason: 'error', error: { code: failed.status, message: expect.any(String) } });
  });

  it('is a 404 for a session that does not exist, and for one of another project, with the same message', async () => {
    const session = sid('mine');
    await runTurns(session, ['x']);
    const missing = await expectError(await getSession(h, sid('nobody')), 404, 'not-found', /does not exist in this project/);
    const foreign = await expectError(await getSession(h, session, { as: stranger }), 404, 'not-found');
    expect(foreign.status.message).toBe(missing.status.message.replace(/"[^"]+"/, `"${session}"`));
    // The owner still sees it.
    expect((await view(await getSession(h, session))).turns).toHaveLength(1);
  });

  it('refuses a bad session id, limit or cursor with a 400 naming it', async () => {
    await expectError(await getSession(h, 'bad id!'), 400, 'invalid-session-id', /session id/);
    await expectError(await getSession(h, 'x'.repeat(129)), 400, 'invalid-session-id');
    // The longest valid id reaches the route (a router limit would answer it with a bare 414).
    await expectError(await getSession(h, 'x'.repeat(128)), 404, 'not-found');
    for (const limit of ['0', '201', 'abc', '1.5', '-1']) {
      await expectError(await getSession(h, sid(), { query: { limit } }), 400, 'invalid-request', /limit/);
    }
    const session = sid('cursor');
    await runTurns(session, ['x']);
    await expectError(await getSession(h, session, { query: { cursor: 'garbage' } }), 400, 'invalid-request', /cursor .* is not valid; pass the "next" value/);
  });

  it('needs a key of the project; a viewer key may read', async () => {
    const session = sid('auth');
    await runTurns(session, ['x']);
    const res = await fetch(`${h.url}/api/sessions/${session}?project_id=${h.projectId}`);
    await expectError(res, 401, 'unauthenticated');
    // No project_id on /api: the key's own project.
    expect((await view(await fetch(`${h.url}/api/sessions/${session}`, { headers: { authorization: `ApiKey ${h.apiKey}` } }))).turns).toHaveLength(1);
    await expectError(await getSession(h, session, { as: { key: h.apiKey, projectId: stranger.projectId } }), 403, 'forbidden');
    expect((await view(await getSession(h, session, { as: await viewerOf(h) }))).turns).toHaveLength(1);
  });
});
