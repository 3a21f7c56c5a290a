import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
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
    const finished = await store.turns.finish(started.id, { status: 'completed', stop_reason: 'end_turn', output, usage });
    expect(finished).toMatchObject({ status: 'completed', stop_reason: 'end_turn', output, usage, error: null, request });
    expect(finished?.ended_at).toEqual(expect.any(String));
    expect(await store.turns.get('p1', started.id)).toEqual(finished);

    // The first ending stands: a late finish does not rewrite it.
    expect(await store.turns.finish(started.id, { status: 'failed', error: { message: 'late' } })).toBeUndefined();
    expect((await store.turns.get('p1', started.id))?.status).toBe('completed');
    expect(await store.turns.finish('missing', { status: 'completed' })).toBeUndefined();
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
