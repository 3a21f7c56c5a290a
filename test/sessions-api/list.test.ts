import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import { SessionList } from '../../src/contract/sessions.ts';
import { builtin, expectError, invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';
import { okJson, otherProject, viewerOf, type Caller } from './client.ts';

/** GET /api/sessions: the project's sessions, newest first, paged and filtered. */

let h: Harness;
let stranger: Caller;
beforeAll(async () => {
  h = await startHarness();
  stranger = await otherProject(h);
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

const list = (query: Record<string, string> = {}, as: Caller = { key: h.apiKey, projectId: h.projectId }) =>
  fetch(`${h.url}/api/sessions?${new URLSearchParams({ project_id: as.projectId, ...query })}`, { headers: { authorization: `ApiKey ${as.key}` } });

async function page(query: Record<string, string> = {}, as?: Caller): Promise<SessionList> {
  const body = await okJson(await list(query, as));
  expect(SessionList.parse(body)).toEqual(body);
  return body as SessionList;
}

const say = (session: string, text: string, agent: unknown = template()) => h.invoke(invokeBody([{ role: 'user', content: text }], agent, { session_id: session }));

describe('listing sessions', () => {
  // One prefix per test keeps each test's sessions apart from the others' in the shared project.
  it('lists the newest first, each with its latest turn, and pages through every one exactly once', async () => {
    const ids = ['ls-a', 'ls-b', 'ls-c', 'ls-d'];
    for (const id of ids) {
      h.model.script({ text: `hi from ${id}`, usage: { input: 3, output: 2 } });
      await readJson(await say(id, 'hello'));
    }
    // Used again: it keeps its place, and says when it was last used.
    h.model.script({ text: 'again' });
    const again = await readJson(await say('ls-b', 'again'));

    const first = await page({ id_prefix: 'ls-', limit: '10' });
    expect(first.sessions.map((s) => s.id)).toEqual(['ls-d', 'ls-c', 'ls-b', 'ls-a']);
    expect(first.sessions[2]!.updated_at > first.sessions[2]!.created_at).toBe(true);
    expect(first.count).toBe(4);
    expect(first.next).toBeUndefined();
    expect(first.sessions[2]).toMatchObject({
      pending_interactions: 0,
      last_turn: { id: again.turn_id, status: 'completed', stop_reason: 'end_turn' },
    });
    expect(first.sessions[0]!.last_turn?.usage).toEqual({ input: 3, output: 2, total: 5 });
    expect(first.sessions[0]!.live_turn).toBeUndefined();

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const one = await page({ id_prefix: 'ls-', limit: '1', ...(cursor ? { cursor } : {}) });
      expect(one.sessions).toHaveLength(1);
      seen.push(one.sessions[0]!.id);
      cursor = one.next;
    } while (cursor !== undefined && seen.length < 10);
    expect(seen).toEqual(['ls-d', 'ls-c', 'ls-b', 'ls-a']);
  });

  it('filters to sessions waiting for an answer, and counts what they wait for', async () => {
    h.model.script({ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] });
    const paused = await readJson(await say('wait-1', 'write it', template({ tools: [builtin('write')], mode: 'ask' })));
    expect(paused.data.outputs.stop_reason).toBe('paused');
    h.model.script({ text: 'done' });
    await readJson(await say('wait-2', 'just talk'));

    const waiting = await page({ id_prefix: 'wait-', status: 'pending' });
    expect(waiting.sessions.map((s) => s.id)).toEqual(['wait-1']);
    expect(waiting.sessions[0]).toMatchObject({ pending_interactions: 1, last_turn: { status: 'paused', stop_reason: 'paused' } });
    expect((await page({ id_prefix: 'wait-' })).sessions.map((s) => s.id)).toEqual(['wait-2', 'wait-1']);
  });

  it('shows a running turn, and filters to live sessions', async () => {
    h.model.script({ text: 'slow', latencyMs: 1500 });
    const running = say('live-1', 'take your time');
    let live: SessionList | undefined;
    for (let i = 0; i < 100 && !live?.sessions.length; i++) {
      live = await page({ id_prefix: 'live-', status: 'live' });
      if (!live.sessions.length) await new Promise((r) => setTimeout(r, 20));
    }
    expect(live!.sessions.map((s) => s.id)).toEqual(['live-1']);
    expect(live!.sessions[0]!.live_turn).toEqual({ id: expect.any(String), started_at: expect.any(String) });
    await readJson(await running);
    expect((await page({ id_prefix: 'live-', status: 'live' })).sessions).toEqual([]);
  });

  it('shows another project nothing, and a viewer everything', async () => {
    h.model.script({ text: 'mine' });
    await readJson(await say('mine-1', 'hello'));
    expect((await page({ id_prefix: 'mine-' }, stranger)).sessions).toEqual([]);
    expect((await page({ id_prefix: 'mine-' }, await viewerOf(h))).sessions.map((s) => s.id)).toEqual(['mine-1']);
  });

  it('leaves out the sessions of evaluation cases, which their run\'s results name', async () => {
    const client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
    const testset = (await client.testsets.create({ data: { testcases: [{ data: { messages: [{ role: 'user', content: 'case' }] } }] } })).revision_id;
    h.model.script({ text: 'answer' });
    const { evaluation } = await client.evaluations.create({ data: { testset_steps: [testset], application_steps: ['agenta:builtin:agent:v0'] } });
    for (let i = 0; i < 200 && ['pending', 'running'].includes((await client.evaluations.get(evaluation.id)).evaluation.data.status); i++) await new Promise((r) => setTimeout(r, 25));
    const [result] = (await client.evaluations.results({ result: { run_id: evaluation.id } })).results;
    expect(result!.session_id).toMatch(/^eval:/);
    expect((await client.sessions.get(result!.session_id!)).turns).toHaveLength(1);
    expect((await page({ id_prefix: 'eval' })).sessions).toEqual([]);
  });

  it('is in the client: filters and paging by name', async () => {
    const client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
    h.model.script({ text: 'ok' });
    await readJson(await say('cli-x1', 'hello'));
    const found = await client.sessions.list({ idPrefix: 'cli-x', limit: 5 });
    expect(found.sessions.map((s) => s.id)).toEqual(['cli-x1']);
  });

  it('refuses bad filters and cursors with a 400 that names them', async () => {
    await expectError(await list({ status: 'sleeping' }), 400, 'invalid-request', /status must be one of pending, live/);
    await expectError(await list({ id_prefix: 'a b' }), 400, 'invalid-request', /id_prefix/);
    await expectError(await list({ limit: '0' }), 400, 'invalid-request', /limit/);
    await expectError(await list({ cursor: 'nope!' }), 400, 'invalid-request', /cursor/);
    const anonymous = await fetch(`${h.url}/api/sessions?project_id=${h.projectId}`);
    await expectError(anonymous, 401, 'unauthenticated');
  });
});
