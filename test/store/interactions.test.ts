import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { CompiledQuery, createQueryId, type RootOperationNode } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { InteractionKind } from '../../src/contract/events.ts';
import { openStore, type Store } from '../../src/store/db.ts';
import { createInteractionsRepo, OPEN_INTERACTION_STATUSES } from '../../src/store/interactions.ts';
import { freshDatabase } from '../support/database.ts';
import { sleep, tempDir } from './helpers.ts';

const dir = await tempDir('interactions');

function newInteraction(store: Store, projectId = 'p1', sessionId = 's1', extra: { turn_id?: string; kind?: InteractionKind } = {}) {
  const toolCallId = `call_${randomUUID()}`;
  return store.interactions.create({
    id: randomUUID(),
    project_id: projectId,
    session_id: sessionId,
    turn_id: extra.turn_id ?? 't1',
    kind: extra.kind ?? 'user_approval',
    tool_call_id: toolCallId,
    request: { tool: 'bash', args: { command: 'ls' }, tool_call_id: toolCallId },
  });
}

describe('interactions', () => {
  it('creates a pending record and reads it back with its JSON parsed', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const created = await newInteraction(store, 'p1', 's1');
    expect(created).toMatchObject({ status: 'pending', kind: 'user_approval', answer: null, resolution: null });
    expect(created.request).toEqual({ tool: 'bash', args: { command: 'ls' }, tool_call_id: created.tool_call_id });
    expect(await store.interactions.get('p1', created.id)).toEqual(created);
    expect(await store.interactions.listPending('p1', 's1')).toEqual([created]);
    await store.close();
  });

  it('transitions only from the listed states and records the answer', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const created = await newInteraction(store);
    const answered = await store.interactions.transition('p1', created.id, { from: ['pending'], to: 'responded', answer: { approved: true } });
    expect(answered).toMatchObject({ status: 'responded', answer: { approved: true }, resolution: null });
    expect(await store.interactions.listPending('p1', 's1')).toEqual([]);
    expect(await store.interactions.transition('p1', created.id, { from: ['pending'], to: 'responded' })).toBeUndefined();
    expect(await store.interactions.transition('p1', created.id, { from: [], to: 'resolved' })).toBeUndefined();
    const resolved = await store.interactions.transition('p1', created.id, { from: ['responded'], to: 'resolved', resolution: { turn_id: 't2' } });
    expect(resolved).toMatchObject({ status: 'resolved', answer: { approved: true }, resolution: { turn_id: 't2' } });
    expect(await store.interactions.transition('p1', 'missing', { from: ['pending'], to: 'cancelled' })).toBeUndefined();
    await store.close();
  });

  it('looks up a session’s or a turn’s interactions without reading every interaction of the project', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const queries: RootOperationNode[] = [];
    const repo = createInteractionsRepo(store.db.withPlugin({ transformQuery: ({ node }) => (queries.push(node), node), transformResult: async ({ result }) => result }));
    await repo.listPending('p1', 's1');
    await repo.query('p1', { turn_id: 't1' }, { limit: 200 });
    await repo.query('p1', { session_id: 's1' }, { limit: 50 });
    await repo.query('p1', { session_id: 's1', status: 'pending' }, { limit: 50 });
    await repo.ofToolCalls('p1', 's1', ['call_a', 'call_b']);
    await repo.cancelPending('p1', 's1');
    expect(queries).toHaveLength(6);
    for (const node of queries) {
      const compiled = store.db.getExecutor().compileQuery(node, createQueryId());
      const plan = await store.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${compiled.sql}`, [...compiled.parameters]));
      const steps = plan.rows.map((row) => row.detail).join(' | ');
      expect(steps, compiled.sql).toMatch(/USING INDEX interactions_(session|session_created|turn)_idx \(project_id=\? AND (session|turn)_id=\?/);
    }
    await store.close();
  });

  it('lets exactly one of two concurrent responders win', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const created = await newInteraction(store);
    const results = await Promise.all([
      store.interactions.transition('p1', created.id, { from: ['pending'], to: 'responded', answer: { by: 'a' } }),
      store.interactions.transition('p1', created.id, { from: ['pending'], to: 'responded', answer: { by: 'b' } }),
    ]);
    const winners = results.filter((r) => r !== undefined);
    expect(winners).toHaveLength(1);
    expect((await store.interactions.get('p1', created.id))?.answer).toEqual(winners[0]?.answer);
    await store.close();
  });

  it('lets exactly one of two processes sharing the database file win', async () => {
    const dataDir = path.join(dir, 'shared');
    const one = await openStore({ dataDir });
    const two = await openStore({ dataDir });
    for (let round = 0; round < 20; round++) {
      const created = await newInteraction(one);
      const results = await Promise.all([
        one.interactions.transition('p1', created.id, { from: ['pending'], to: 'responded', answer: { by: 'one' } }),
        two.interactions.transition('p1', created.id, { from: ['pending'], to: 'cancelled' }),
      ]);
      expect(results.filter((r) => r !== undefined)).toHaveLength(1);
    }
    await one.close();
    await two.close();
  });

  it('is invisible and immovable from another project', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const created = await newInteraction(store, 'p1', 's1');
    expect(await store.interactions.get('p2', created.id)).toBeUndefined();
    expect(await store.interactions.listPending('p2', 's1')).toEqual([]);
    expect(await store.interactions.transition('p2', created.id, { from: ['pending'], to: 'responded' })).toBeUndefined();
    expect(await store.interactions.cancelPending('p2', 's1')).toBe(0);
    expect((await store.interactions.get('p1', created.id))?.status).toBe('pending');
    await store.close();
  });

  it('cancels a session’s pending interactions except the ones kept', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const keep = await newInteraction(store);
    const drop = await newInteraction(store);
    const responded = await newInteraction(store);
    const resolved = await newInteraction(store);
    const elsewhere = await newInteraction(store, 'p1', 's2');
    await store.interactions.transition('p1', responded.id, { from: ['pending'], to: 'responded' });
    await store.interactions.transition('p1', resolved.id, { from: ['pending'], to: 'resolved' });

    expect(await store.interactions.cancelPending('p1', 's1', [keep.id])).toBe(1);
    const status = async (id: string) => (await store.interactions.get('p1', id))?.status;
    expect(await status(keep.id)).toBe('pending');
    expect(await status(drop.id)).toBe('cancelled');
    expect(await status(responded.id)).toBe('responded');
    expect(await status(resolved.id)).toBe('resolved');
    expect(await status(elsewhere.id)).toBe('pending');

    // A takeover abandons answered-but-unconsumed records as well.
    expect(await store.interactions.cancelPending('p1', 's1', [], OPEN_INTERACTION_STATUSES)).toBe(2);
    expect(await status(keep.id)).toBe('cancelled');
    expect(await status(responded.id)).toBe('cancelled');
    expect(await status(resolved.id)).toBe('resolved');
    expect(await store.interactions.cancelPending('p1', 's1')).toBe(0);
    await store.close();
  });

  it('queries a project’s records oldest first by any filter, one page at a time', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const a = await newInteraction(store, 'p1', 's1', { turn_id: 't1' });
    const b = await newInteraction(store, 'p1', 's1', { turn_id: 't2', kind: 'client_tool' });
    const c = await newInteraction(store, 'p1', 's2', { turn_id: 't3' });
    const d = await newInteraction(store, 'p1', 's1', { turn_id: 't2' });
    await newInteraction(store, 'p2', 's1');
    // Equal timestamps are ordered by id and still each reached once.
    await store.db.updateTable('interactions').set({ created_at: '2030-01-01T00:00:00.000Z' }).where('id', 'in', [b.id, c.id, d.id]).execute();
    await store.interactions.transition('p1', a.id, { from: ['pending'], to: 'responded' });
    await store.interactions.transition('p1', c.id, { from: ['pending'], to: 'cancelled' });
    const tied = [b, c, d].map((r) => r.id).sort();

    const ids = async (filters: Parameters<Store['interactions']['query']>[1], limit = 100) => {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.interactions.query('p1', filters, { limit, cursor });
        seen.push(...page.items.map((r) => r.id));
        cursor = page.next;
      } while (cursor !== undefined);
      return seen;
    };
    expect(await ids({})).toEqual([a.id, ...tied]);
    expect(await ids({}, 1)).toEqual([a.id, ...tied]);
    expect(await ids({ session_id: 's1' }, 2)).toEqual([a.id, ...tied.filter((id) => id !== c.id)]);
    expect(await ids({ turn_id: 't2' })).toEqual(tied.filter((id) => id === b.id || id === d.id));
    expect(await ids({ kind: 'client_tool' })).toEqual([b.id]);
    expect(await ids({ status: 'pending' })).toEqual(tied.filter((id) => id !== c.id));
    expect(await ids({ status: ['responded', 'cancelled'] })).toEqual([a.id, c.id]);
    expect(await ids({ status: [] })).toEqual([]);
    expect(await ids({ session_id: 's1', status: 'pending', kind: 'user_approval' })).toEqual([d.id]);

    const first = await store.interactions.query('p1', {}, { limit: 1 });
    expect(first.items[0]).toEqual(await store.interactions.get('p1', a.id));
    expect(first.next).toEqual(expect.any(String));
    await expect(store.interactions.query('p1', {}, { limit: 1, cursor: 'nope' })).rejects.toMatchObject({ type: 'invalid-request', message: /pass the "next" value/ });
    expect(await store.interactions.query('p3', {}, { limit: 10 })).toEqual({ items: [] });
    await store.close();
  });

  it('lists records in a status across projects, least recently changed first', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const one = await newInteraction(store, 'p1', 's1');
    const two = await newInteraction(store, 'p2', 's9');
    const three = await newInteraction(store, 'p3', 's1');
    await newInteraction(store, 'p1', 's2');
    for (const [record, project] of [[two, 'p2'], [one, 'p1'], [three, 'p3']] as const) {
      await store.interactions.transition(project, record.id, { from: ['pending'], to: 'responded', answer: { approved: true } });
      await sleep(3);
    }
    expect((await store.interactions.listByStatus('responded', 10)).map((r) => r.id)).toEqual([two.id, one.id, three.id]);
    expect((await store.interactions.listByStatus('responded', 2)).map((r) => r.id)).toEqual([two.id, one.id]);
    expect(await store.interactions.listByStatus('pending', 10)).toHaveLength(1);
    expect(await store.interactions.listByStatus(['pending', 'responded'], 10)).toHaveLength(4);
    expect(await store.interactions.listByStatus([], 10)).toEqual([]);
    await store.close();
  });
});

describe('transitionAll, on the engine under test', () => {
  it('makes several transitions all or none, and names the one that found its record moved on', async () => {
    const database = await freshDatabase();
    const store = await openStore({ dataDir: await tempDir('interactions-all'), databaseUrl: database.url });
    try {
      const projectId = (await store.projects.ensure('all-or-none')).id;
      const a = await newInteraction(store, projectId);
      const b = await newInteraction(store, projectId);
      // b is answered through the API between a turn reading the decisions and claiming them.
      await store.interactions.transition(projectId, b.id, { from: ['pending'], to: 'responded', answer: { approved: false } });
      const claims = [a, b].map((r) => ({ id: r.id, from: ['pending' as const], to: 'resolved' as const, resolution: { via: 'in_band' } }));
      expect(await store.interactions.transitionAll(projectId, claims)).toBe(b.id);
      expect((await store.interactions.get(projectId, a.id))?.status).toBe('pending');
      expect((await store.interactions.get(projectId, b.id))?.status).toBe('responded');

      expect(await store.interactions.transitionAll(projectId, [claims[0]!, { ...claims[1]!, from: ['responded' as const] }])).toBeUndefined();
      expect((await store.interactions.get(projectId, a.id))?.status).toBe('resolved');
      expect((await store.interactions.get(projectId, b.id))?.status).toBe('resolved');
    } finally {
      await store.close();
      await database.drop();
    }
  });
});
