import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Store } from '../../src/store/db.ts';
import { expectError, invokeBody, readFrames, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/** A turn runs detached from its caller: others can attach to it, take it over, or leave it. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

const agent = template();
const hello = (session: string) => invokeBody([{ role: 'user', content: 'hi' }], agent, { session_id: session });
const FORCE = { 'x-ag-session-control': 'force' };

/**
 * Holds the first turn that writes its row from now on, in its setup with its session's lease
 * already taken, until `until` resolves. `held` resolves once it is held.
 */
function holdSetup(store: Store, until: Promise<unknown>) {
  const { create } = store.turns;
  const held = Promise.withResolvers<void>();
  let first = true;
  store.turns.create = async (...args) => {
    if (first) {
      first = false;
      held.resolve();
      await until;
    }
    return create(...args);
  };
  return { held: held.promise, restore: () => void (store.turns.create = create) };
}

/** Resolves once a session's lease has been read from now on. */
function leaseRead(store: Store) {
  const { get } = store.leases;
  const read = Promise.withResolvers<void>();
  store.leases.get = async (...args) => {
    const lease = await get(...args);
    read.resolve();
    return lease;
  };
  return { read: read.promise, restore: () => void (store.leases.get = get) };
}

async function waitFor(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('condition not reached');
}

const modelCalled = (n: number) => async () => h.model.requests.length >= n;

describe('live turns', () => {
  it('attach (force, no input) replays a live turn from its start and follows it to the end', async () => {
    const session = sid('attach');
    h.model.script({ text: 'slow words', latencyMs: 400 });
    const owner = h.invoke(hello(session));
    await waitFor(modelCalled(1));
    const attached = await h.invoke({ session_id: session, data: {} }, { headers: { ...FORCE, accept: 'text/event-stream' } });
    const { frames } = await readFrames(attached);
    expect(frames[0]!.type).toBe('turn_start');
    expect(frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'end_turn' } });
    expect(frames.filter((f) => f.type === 'message_delta').map((f) => (f.data as { delta: string }).delta).join('')).toBe('slow words');
    const ownerBody = await readJson(await owner);
    expect(ownerBody.turn_id).toBe((frames[0]!.data as { turn_id: string }).turn_id);
  });

  it('attach as JSON waits for the live turn and returns its output', async () => {
    const session = sid('attach-json');
    h.model.script({ text: 'waited for', latencyMs: 300 });
    const owner = h.invoke(hello(session));
    await waitFor(modelCalled(1));
    const body = await readJson(await h.invoke({ session_id: session }, { headers: FORCE }));
    expect(body.data.outputs.messages.at(-1).content).toBe('waited for');
    expect((await readJson(await owner)).turn_id).toBe(body.turn_id);
  });

  it('attach with no live turn is a 404 that says how to start one', async () => {
    await expectError(await h.invoke({ session_id: sid('idle') }, { headers: FORCE }), 404, 'not-found', 'no live turn');
  });

  it('attach while two turns start at once follows the one that took the session, whichever began first', async () => {
    const session = sid('two-starts');
    h.model.script({ text: 'the later one won' });
    // The first turn asks for the session only once the second has it; the second is held in its
    // setup, lease taken, until the attach has read that lease.
    const { leases } = h.store;
    const { acquire } = leases;
    const secondTook = Promise.withResolvers<void>();
    let asked = 0;
    leases.acquire = async (input) => {
      if (++asked === 1) return secondTook.promise.then(() => acquire(input));
      const got = await acquire(input);
      secondTook.resolve();
      return got;
    };
    const reading = Promise.withResolvers<void>();
    const setup = holdSetup(h.store, reading.promise);
    let lease: ReturnType<typeof leaseRead> | undefined;
    try {
      const first = h.invoke(hello(session));
      await waitFor(async () => asked === 1);
      const second = h.invoke(hello(session));
      await expectError(await first, 409, 'session-busy');
      lease = leaseRead(h.store);
      reading.resolve(lease.read);
      const attached = await readJson(await h.invoke({ session_id: session }, { headers: FORCE }));
      const secondBody = await readJson(await second);
      expect(attached.turn_id).toBe(secondBody.turn_id);
      expect(attached.data.outputs.messages.at(-1).content).toBe('the later one won');
    } finally {
      leases.acquire = acquire;
      setup.restore();
      lease?.restore();
    }
  });

  it('force with input cancels the live turn and runs the new one', async () => {
    const session = sid('takeover');
    h.model.script([{ hang: true }, { text: 'the new turn' }]);
    const old = h.invoke(hello(session));
    await waitFor(modelCalled(1));
    const res = await h.invoke(hello(session), { headers: FORCE });
    expect((await readJson(res)).data.outputs.messages.at(-1).content).toBe('the new turn');
    await expectError(await old, 409, 'turn-cancelled');
    const turns = await h.store.turns.listForSession(h.projectId, session, { limit: 5 });
    expect(turns.map((t) => t.status).sort()).toEqual(['cancelled', 'completed']);
  });

  it('force takes over a turn still being set up at once, not at its lease\'s next renewal', async () => {
    // Renewed every 40 s: asked to stop through its lease, the turn would run to its end first.
    const r = await startHarness({ env: { AGENTD_LEASE_TTL_MS: '120000' } });
    try {
      const session = sid('takeover-early');
      // Whichever turn reaches the model first: the one taken over may, before it is stopped.
      r.model.script(() => ({ text: 'the new turn' }));
      const { leases } = r.store;
      const { acquire } = leases;
      const refused = Promise.withResolvers<void>();
      const setup = holdSetup(r.store, refused.promise);
      leases.acquire = async (input) => {
        const got = await acquire(input);
        if (!got.acquired) refused.resolve();
        return got;
      };
      try {
        const old = r.invoke(hello(session));
        await setup.held;
        const res = await r.invoke(hello(session), { headers: FORCE });
        expect((await readJson(res)).data.outputs.messages.at(-1).content).toBe('the new turn');
        await expectError(await old, 409, 'turn-cancelled');
      } finally {
        leases.acquire = acquire;
        setup.restore();
      }
    } finally {
      await r.close();
    }
  });

  it('a second turn without force is refused while one is live', async () => {
    const session = sid('busy');
    h.model.script({ text: 'first', latencyMs: 300 });
    const first = h.invoke(hello(session));
    await waitFor(modelCalled(1));
    const body = await expectError(await h.invoke(hello(session)), 409, 'session-busy');
    const firstBody = await readJson(await first);
    expect(body.status.message).toContain(firstBody.turn_id);
  });

  it('a client that disconnects mid-stream does not stop the turn; its output is stored', async () => {
    const session = sid('gone');
    h.model.script({ text: 'still finished', latencyMs: 100, chunkDelayMs: 50 });
    const controller = new AbortController();
    const res = await h.invoke(hello(session), { headers: { accept: 'text/event-stream' }, signal: controller.signal });
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await waitFor(async () => (await h.store.turns.listForSession(h.projectId, session, { limit: 1 }))[0]?.status === 'completed');
    const [turn] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(JSON.stringify(turn?.output)).toContain('still finished');
  });
});

describe('live turns across processes sharing one database', () => {
  it('force takes over a turn that another agentd runs: the holder sees the request through its lease', async () => {
    const env = { AGENTD_LEASE_TTL_MS: '600' };
    const a = await startHarness({ env });
    const b = await startHarness({ env, dataDir: a.dataDir, databaseUrl: a.databaseUrl });
    try {
      const session = sid('remote');
      a.model.script({ hang: true });
      b.model.script({ text: 'taken over' });
      const old = a.invoke(hello(session));
      await waitFor(async () => a.model.requests.length >= 1);
      await expectError(await b.invoke(hello(session)), 409, 'session-busy');
      const res = await b.invoke(hello(session), { headers: FORCE });
      expect((await readJson(res)).data.outputs.messages.at(-1).content).toBe('taken over');
      await expectError(await old, 409, 'turn-cancelled');
      const turns = await a.store.turns.listForSession(a.projectId, session, { limit: 5 });
      expect(turns.map((t) => t.status).sort()).toEqual(['cancelled', 'completed']);
      // Attaching to a turn that runs elsewhere says so instead of pretending it is absent: on
      // SQLite, where it runs; on PostgreSQL, that its process did not answer (these in-process
      // servers do not answer followers: only `agentd serve` does).
      b.model.script([{ hang: true }, { text: 'last word' }]);
      const hanging = b.invoke(hello(session));
      await waitFor(async () => b.model.requests.length >= 2);
      const attached = await a.invoke({ session_id: session }, { headers: FORCE });
      if (a.databaseUrl) await expectError(attached, 503, 'unavailable', /agentd process running the turn did not answer/);
      else await expectError(attached, 409, 'session-busy', /another agentd process/);
      expect((await readJson(await b.invoke(hello(session), { headers: FORCE }))).data.outputs.messages.at(-1).content).toBe('last word');
      await expectError(await hanging, 409, 'turn-cancelled');
    } finally {
      await b.close();
      await a.close();
    }
  });
});

describe('stopping a live turn', () => {
  const stop = (session: string, key = h.apiKey) =>
    fetch(`${h.url}/api/sessions/${session}/stop?project_id=${h.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${key}` } });

  it('ends the turn cancelled, and tells its caller why', async () => {
    const session = sid('stop');
    h.model.script({ text: 'never finished', latencyMs: 5_000 });
    const caller = h.invoke(hello(session));
    await waitFor(modelCalled(1));
    const res = await stop(session);
    expect(res.status).toBe(200);
    const { turn_id } = await res.json();
    await expectError(await caller, 409, 'turn-cancelled', 'the turn was stopped on request');
    const turn = await h.store.turns.get(h.projectId, turn_id);
    expect(turn?.status).toBe('cancelled');
    // The session is free at once.
    h.model.script({ text: 'next' });
    expect((await readJson(await h.invoke(hello(session)))).data.outputs.messages.at(-1).content).toBe('next');
  });

  it('stops a turn still being set up, which has its session already: it has ended cancelled when the stop answers', async () => {
    const session = sid('stop-early');
    h.model.script({ text: 'never finished', latencyMs: 5_000 });
    const reading = Promise.withResolvers<void>();
    const setup = holdSetup(h.store, reading.promise);
    let lease: ReturnType<typeof leaseRead> | undefined;
    try {
      const caller = h.invoke(hello(session));
      await setup.held;
      lease = leaseRead(h.store);
      reading.resolve(lease.read);
      const res = await stop(session);
      expect(res.status).toBe(200);
      const { turn_id } = await res.json();
      expect((await h.store.turns.get(h.projectId, turn_id))?.status).toBe('cancelled');
      await expectError(await caller, 409, 'turn-cancelled');
    } finally {
      setup.restore();
      lease?.restore();
    }
  });

  it('frees the session when the turn’s ending cannot be written', async () => {
    const session = sid('unwritten');
    // The database refuses the ending once (a lost connection, a full disk).
    const finish = vi.spyOn(h.store.turns, 'finish').mockRejectedValueOnce(new Error('disk full'));
    try {
      h.model.script({ text: 'lost' });
      expect((await h.invoke(hello(session))).status).toBe(200);
      expect(finish).toHaveBeenCalledTimes(1);
      expect(await h.store.leases.get(h.projectId, session)).toBeUndefined();
      h.model.script({ text: 'next' });
      expect((await readJson(await h.invoke(hello(session)))).data.outputs.messages.at(-1).content).toBe('next');
    } finally {
      finish.mockRestore();
    }
  });

  it('is a 404 when nothing runs, and needs a role that may act', async () => {
    await expectError(await stop(sid('idle')), 404, 'not-found', /runs no turn to stop/);
    const viewer = (await h.store.apiKeys.create(h.projectId, 'viewer')).key;
    await expectError(await stop(sid('idle'), viewer), 403, 'forbidden');
  });
});

describe('lease renewals', () => {
  it('renew every live turn of the process in one statement per period, not one per turn', async () => {
    const r = await startHarness({ env: { AGENTD_LEASE_TTL_MS: '600' } });
    try {
      const renewals = vi.spyOn(r.store.leases, 'renewHeld');
      r.model.script({ text: 'slow', latencyMs: 1500 });
      const turns = Array.from({ length: 4 }, (_, i) => r.invoke(hello(sid(`renew-${i}`))));
      await Promise.all(turns.map(async (t) => expect((await t).status).toBe(200)));
      // 1.5 s of four live turns, renewed every 200 ms: about 7 statements, where one a turn would be about 28.
      expect(renewals.mock.calls.length).toBeGreaterThanOrEqual(3);
      expect(renewals.mock.calls.length).toBeLessThanOrEqual(10);
      expect(Math.max(...renewals.mock.calls.map(([, ids]) => ids.length))).toBe(4);
    } finally {
      await r.close();
    }
  });
});
