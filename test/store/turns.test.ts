import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { encodeCursor } from '../../src/store/cursor.ts';
import { openStore, type Store } from '../../src/store/db.ts';
import { sleep, tempDir } from './helpers.ts';

const dir = await tempDir('turns');

function newTurn(store: Store, projectId: string, sessionId: string, extra: { request?: Record<string, unknown> } = {}) {
  return store.turns.create({
    id: randomUUID(),
    project_id: projectId,
    session_id: sessionId,
    trace_id: 'a'.repeat(32),
    span_id: 'b'.repeat(16),
    ...extra,
  });
}

describe('turns', () => {
  it('records a turn from start to finish with its JSON columns round-tripped', async () => {
    const store = await openStore({ dataDir: path.join(dir, 'lifecycle') });
    const request = { tags: { env: 'test' }, meta: { n: 1 }, links: { parent: { trace_id: 't', span_id: 's' } } };
    const started = await newTurn(store, 'p1', 's1', { request });
    expect(started).toMatchObject({ status: 'running', stop_reason: null, parent_span_id: null, request, output: null, ended_at: null });
    expect(await store.turns.get('p1', started.id)).toEqual(started);

    const output = { messages: [{ role: 'assistant', content: 'hi' }] };
    const usage = { input: 10, output: 5, total: 15 };
    expect(await store.turns.finish(started.id, { status: 'completed', stop_reason: 'end_turn', output, usage })).toBe(true);
    const finished = await store.turns.get('p1', started.id);
    expect(finished).toMatchObject({ status: 'completed', stop_reason: 'end_turn', output, usage, error: null, request });
    expect(finished?.ended_at).toEqual(expect.any(String));

    // The first ending stands: a late finish does not rewrite it.
    expect(await store.turns.finish(started.id, { status: 'failed', error: { message: 'late' } })).toBe(false);
    expect(await store.turns.get('p1', started.id)).toEqual(finished);
    expect(await store.turns.finish('missing', { status: 'completed' })).toBe(false);
    await store.close();
  });

  it('writes the session with the turn, and gives the lease back with its ending, whether or not the turn was still running', async () => {
    const store = await openStore({ dataDir: path.join(dir, 'together') });
    const turnId = randomUUID();
    expect(await store.leases.acquire({ projectId: 'p1', sessionId: 's1', turnId, holder: 'me', ttlMs: 60_000 })).toMatchObject({ acquired: true });
    const started = await store.turns.create({ id: turnId, project_id: 'p1', session_id: 's1', trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16), started_at: '2026-01-02T03:04:05.678Z' });
    expect(await store.sessions.get('p1', 's1')).toEqual({ project_id: 'p1', id: 's1', created_at: started.started_at, updated_at: started.started_at });

    // A later turn of the session marks it as used when it starts, and keeps its creation date.
    const later = await newTurn(store, 'p1', 's1');
    expect(await store.sessions.get('p1', 's1')).toMatchObject({ created_at: started.started_at, updated_at: later.started_at });

    // Another turn's ending leaves the lease alone; its own gives it back.
    expect(await store.turns.finish(later.id, { status: 'completed' }, { project_id: 'p1', session_id: 's1' })).toBe(true);
    expect(await store.leases.get('p1', 's1')).toMatchObject({ turn_id: turnId });
    expect(await store.turns.finish(turnId, { status: 'completed', stop_reason: 'end_turn' }, { project_id: 'p1', session_id: 's1' })).toBe(true);
    expect(await store.leases.get('p1', 's1')).toBeUndefined();
    expect(await store.turns.get('p1', turnId)).toMatchObject({ status: 'completed', stop_reason: 'end_turn' });

    // A turn that had already ended still gives back a lease it holds, and its ending stands.
    const again = randomUUID();
    await store.leases.acquire({ projectId: 'p1', sessionId: 's1', turnId: again, holder: 'me', ttlMs: 60_000 });
    await store.turns.create({ id: again, project_id: 'p1', session_id: 's1', trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) }, { status: 'interrupted' });
    expect(await store.turns.finish(again, { status: 'completed' }, { project_id: 'p1', session_id: 's1' })).toBe(false);
    expect(await store.leases.get('p1', 's1')).toBeUndefined();
    expect(await store.turns.get('p1', again)).toMatchObject({ status: 'interrupted' });
    await store.close();
  });

  it('hides a turn from another project', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const turn = await newTurn(store, 'p1', 's1');
    expect(await store.turns.get('p2', turn.id)).toBeUndefined();
    expect(await store.turns.listForSession('p2', 's1', { limit: 10 })).toEqual([]);
    await store.close();
  });

  it('lists a session newest first, with limit and before', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const turns = [];
    for (let i = 0; i < 4; i++) {
      turns.push(await newTurn(store, 'p1', 's1'));
      await sleep(3);
    }
    await newTurn(store, 'p1', 'other');
    const all = await store.turns.listForSession('p1', 's1', { limit: 10 });
    expect(all.map((t) => t.id)).toEqual(turns.map((t) => t.id).reverse());
    const page = await store.turns.listForSession('p1', 's1', { limit: 2 });
    expect(page.map((t) => t.id)).toEqual([turns[3]!.id, turns[2]!.id]);
    const next = await store.turns.listForSession('p1', 's1', { limit: 2, before: page[1]!.started_at });
    expect(next.map((t) => t.id)).toEqual([turns[1]!.id, turns[0]!.id]);
    await store.close();
  });

  it('pages a session newest first by cursor, reaching turns started in the same millisecond exactly once', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const turns = [];
    for (let i = 0; i < 7; i++) turns.push(await newTurn(store, 'p1', 's1'));
    await newTurn(store, 'p1', 'other');
    // Several turns stamped alike: only the id tells them apart, so a timestamp cursor alone would drop some.
    const same = '2030-01-01T00:00:00.000Z';
    await store.db.updateTable('turns').set({ started_at: same }).where('id', 'in', turns.slice(1, 5).map((t) => t.id)).execute();
    const expected = (await store.turns.listForSession('p1', 's1', { limit: 100 })).map((t) => t.id);
    expect(expected).toHaveLength(7);

    for (const limit of [1, 2, 3, 7, 50]) {
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.turns.listForSessionPage('p1', 's1', { limit, cursor });
        expect(page.items.length).toBeLessThanOrEqual(limit);
        seen.push(...page.items.map((t) => t.id));
        cursor = page.next;
        pages++;
      } while (cursor !== undefined);
      expect(seen).toEqual(expected);
      // A full last page does not promise a next one that would come back empty.
      expect(pages).toBe(Math.ceil(7 / limit));
    }
    expect((await store.turns.listForSessionPage('p1', 's1', { limit: 2 })).items[0]).toEqual(await store.turns.get('p1', expected[0]!));
    expect(await store.turns.listForSessionPage('p2', 's1', { limit: 10 })).toEqual({ items: [] });
    await store.close();
  });

  it('refuses a cursor it did not issue, saying what to pass instead', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const b64 = (text: string) => Buffer.from(text).toString('base64url');
    for (const cursor of ['not a cursor!', b64('plain text'), b64('{"at":"2030-01-01T00:00:00.000Z"}'), b64('["yesterday","x"]'), b64('[1,2]'), b64('["2030-01-01T00:00:00.000Z",""]')]) {
      await expect(store.turns.listForSessionPage('p1', 's1', { limit: 5, cursor })).rejects.toMatchObject({
        type: 'invalid-request',
        status: 400,
        message: expect.stringMatching(/^cursor ".*" is not valid; pass the "next" value of the previous page$/),
      });
    }
    const wellFormed = encodeCursor({ at: '2030-01-01T00:00:00.000Z', id: 'z' });
    expect(await store.turns.listForSessionPage('p1', 's1', { limit: 5, cursor: wellFormed })).toEqual({ items: [] });
    await store.close();
  });

  it('marks running turns interrupted, all of them or only those named', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const [a, b, c, done] = [await newTurn(store, 'p1', 's1'), await newTurn(store, 'p1', 's2'), await newTurn(store, 'p2', 's3'), await newTurn(store, 'p1', 's4')];
    await store.turns.finish(done.id, { status: 'completed', stop_reason: 'end_turn' });

    expect(await store.turns.markRunningAsInterrupted([])).toBe(0);
    expect(await store.turns.markRunningAsInterrupted([a.id, done.id])).toBe(1);
    expect(await store.turns.get('p1', a.id)).toMatchObject({ status: 'interrupted', stop_reason: 'interrupted', ended_at: expect.any(String) });
    expect((await store.turns.get('p1', b.id))?.status).toBe('running');

    expect(await store.turns.markRunningAsInterrupted()).toBe(2);
    expect((await store.turns.get('p1', b.id))?.status).toBe('interrupted');
    expect((await store.turns.get('p2', c.id))?.status).toBe('interrupted');
    expect(await store.turns.get('p1', done.id)).toMatchObject({ status: 'completed', stop_reason: 'end_turn' });
    expect(await store.turns.markRunningAsInterrupted()).toBe(0);
    await store.close();
  });
});
