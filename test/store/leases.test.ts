import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.ts';
import { sleep, tempDir } from './helpers.ts';

let store: Store;
let other: Store;
beforeAll(async () => {
  const dir = await tempDir('leases');
  store = await openStore({ dataDir: dir });
  other = await openStore({ dataDir: dir });
});
afterAll(async () => {
  await store.close();
  await other.close();
});

const take = (s: Store, session: string, turn: string, ttlMs = 10_000, holder = 'p1') =>
  s.leases.acquire({ projectId: 'p', sessionId: session, turnId: turn, holder, ttlMs });

describe('session leases', () => {
  it('lets one turn hold a session and refuses a second while the lease lives', async () => {
    expect(await take(store, 's1', 't1')).toMatchObject({ acquired: true });
    const second = await take(other, 's1', 't2', 10_000, 'p2');
    expect(second).toMatchObject({ acquired: false, current: { turn_id: 't1', holder: 'p1' } });
  });

  it('hands an expired lease to the next turn and names the turn it took over from', async () => {
    await take(store, 's2', 't1', 30);
    await sleep(60);
    const next = await take(other, 's2', 't2', 10_000, 'p2');
    expect(next).toMatchObject({ acquired: true, lease: { turn_id: 't2', holder: 'p2' }, expired: { turn_id: 't1' } });
    expect((await store.leases.renewHeld('p1', ['t1'], 10_000)).some((lease) => lease.session_id === 's2')).toBe(false);
  });

  it('renews all of a holder\'s leases in one statement, and no one else\'s', async () => {
    await take(store, 'r1', 'ta');
    await take(store, 'r2', 'tb');
    await take(other, 'r3', 'tc', 10_000, 'p2');
    const renewed = await store.leases.renewHeld('p1', ['ta', 'tb', 'tc'], 60_000);
    expect(renewed.map((l) => l.turn_id).sort()).toEqual(['ta', 'tb']);
    expect(renewed.every((l) => l.live)).toBe(true);
    expect((await store.leases.get('p', 'r3'))!.expires_at < renewed[0]!.expires_at).toBe(true);
  });

  it('renews, carries a cancel request to the holder, and releases only its own turn', async () => {
    await take(store, 's3', 't1');
    expect(await store.leases.requestCancel('p', 's3', 't1')).toBe(true);
    expect((await store.leases.renewHeld('p1', ['t1'], 10_000)).find((lease) => lease.session_id === 's3')?.cancel_requested).toBe(true);
    await store.leases.release('p', 's3', 'other-turn');
    expect(await store.leases.get('p', 's3')).toBeDefined();
    await store.leases.release('p', 's3', 't1');
    expect(await store.leases.get('p', 's3')).toBeUndefined();
    expect(await take(store, 's3', 't2')).toMatchObject({ acquired: true });
  });

  it('gives a free session to exactly one of many racing turns', async () => {
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => take(i % 2 ? store : other, 's4', `t${i}`)));
    expect(results.filter((r) => r.acquired)).toHaveLength(1);
  });

  it('lists expired leases for the sweep', async () => {
    await take(store, 's5', 't1', 1);
    await sleep(20);
    expect((await store.leases.listExpired()).map((l) => l.session_id)).toContain('s5');
  });
});
