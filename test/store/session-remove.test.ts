import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.ts';

async function populate(store: Store, projectId: string, sessionId: string) {
  await store.sessions.touch(projectId, sessionId);
  const turn = await store.turns.create({ id: randomUUID(), project_id: projectId, session_id: sessionId, trace_id: 't'.repeat(32), span_id: 's'.repeat(16) });
  await store.interactions.create({
    id: randomUUID(),
    project_id: projectId,
    session_id: sessionId,
    turn_id: turn.id,
    kind: 'user_approval',
    tool_call_id: 'call_1',
    request: { tool: 'bash', args: {}, tool_call_id: 'call_1' },
  });
  await store.leases.acquire({ projectId, sessionId, turnId: turn.id, holder: 'h', ttlMs: 60_000 });
  return turn;
}

async function counts(store: Store, projectId: string, sessionId: string) {
  return {
    session: (await store.sessions.get(projectId, sessionId)) !== undefined,
    turns: (await store.turns.listForSession(projectId, sessionId, { limit: 100 })).length,
    interactions: (await store.interactions.query(projectId, { session_id: sessionId }, { limit: 100 })).items.length,
    lease: (await store.leases.get(projectId, sessionId)) !== undefined,
  };
}

const everything = { session: true, turns: 1, interactions: 1, lease: true };
const nothing = { session: false, turns: 0, interactions: 0, lease: false };

describe('sessions.remove', () => {
  it('deletes the session with its turns, interactions and lease, and nothing of other sessions', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    await populate(store, 'p1', 's1');
    await populate(store, 'p1', 's2');
    await populate(store, 'p2', 's1');
    expect(await store.sessions.remove('p1', 's1')).toBe(true);
    expect(await counts(store, 'p1', 's1')).toEqual(nothing);
    expect(await counts(store, 'p1', 's2')).toEqual(everything);
    expect(await counts(store, 'p2', 's1')).toEqual(everything);
    expect(await store.sessions.remove('p1', 's1')).toBe(false);
    expect(await store.sessions.remove('p3', 's2')).toBe(false);
    await store.close();
  });

  it('leaves everything in place when any part of the deletion fails', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    await populate(store, 'p1', 's1');
    // The session row goes last, after the turns, interactions and lease: failing there proves the rest rolls back.
    await sql`create trigger refuse_session_delete before delete on sessions begin select raise(abort, 'refused by test'); end`.execute(store.db);
    await expect(store.sessions.remove('p1', 's1')).rejects.toThrow(/refused by test/);
    expect(await counts(store, 'p1', 's1')).toEqual(everything);
    await sql`drop trigger refuse_session_delete`.execute(store.db);
    expect(await store.sessions.remove('p1', 's1')).toBe(true);
    expect(await counts(store, 'p1', 's1')).toEqual(nothing);
    await store.close();
  });
});
