import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.ts';
import pg from 'pg';
import { freshDatabase, TEST_POSTGRES_URL, type TestDatabase } from '../support/database.ts';
import { sleep, tempDir } from './helpers.ts';

/**
 * Claiming evaluation cases, on the engine under test: the cap counts every holder's live claims,
 * a claim that lapsed is taken over, cases go in id order once their retry time has come, and
 * nothing is claimed twice.
 */

let database: TestDatabase;
let store: Store;
let projectId: string;
let seq = 0;
beforeAll(async () => {
  database = await freshDatabase();
  store = await openStore({ dataDir: await tempDir('claims'), databaseUrl: database.url });
  projectId = (await store.projects.ensure('claims')).id;
});
afterAll(async () => {
  await store.close();
  await database.drop();
});

/** A run of `n` pending cases, ids `<run>-000`, `<run>-001`, … */
async function run(n: number): Promise<{ runId: string; ids: string[] }> {
  const runId = `run-${++seq}`;
  const ids = Array.from({ length: n }, (_, i) => `${runId}-${String(i).padStart(3, '0')}`);
  await store.evaluations.createRun({ id: runId, project_id: projectId, spec: {} }, ids.map((id, i) => ({ id, testcase_id: `t${i}`, repeat_idx: 0 })));
  return { runId, ids };
}

const claimIds = async (runId: string, holder: string, limit: number, cap: number, ttlMs = 60_000) =>
  (await store.evaluations.claim(runId, holder, limit, cap, ttlMs)).map((r) => r.id);

describe('claiming evaluation cases', () => {
  it('takes pending cases in id order, marks them running for the holder, and never twice', async () => {
    const { runId, ids } = await run(5);
    const first = await store.evaluations.claim(runId, 'a', 2, 10, 60_000);
    expect(first.map((r) => [r.id, r.status])).toEqual([
      [ids[0], 'running'],
      [ids[1], 'running'],
    ]);
    expect(await claimIds(runId, 'b', 10, 10)).toEqual(ids.slice(2));
    expect(await claimIds(runId, 'a', 10, 10)).toEqual([]);
  });

  it('keeps every holder’s live claims under the cap', async () => {
    const { runId, ids } = await run(6);
    expect(await claimIds(runId, 'a', 3, 4)).toEqual(ids.slice(0, 3));
    expect(await claimIds(runId, 'b', 3, 4)).toEqual([ids[3]]);
    expect(await claimIds(runId, 'b', 3, 4)).toEqual([]);
  });

  it('skips a pending case until its retry time has come', async () => {
    const { runId, ids } = await run(2);
    await claimIds(runId, 'a', 1, 10);
    expect(await store.evaluations.updateResult(ids[0]!, 'a', { status: 'pending', retry_in_ms: 60_000, attempts: [] })).toBe(true);
    expect(await claimIds(runId, 'a', 10, 10)).toEqual([ids[1]]);
  });

  it('takes over a lapsed claim, in id order with the pending cases, and the old holder can no longer write', async () => {
    const { runId, ids } = await run(4);
    expect(await claimIds(runId, 'dead', 1, 10, 30)).toEqual([ids[0]]);
    await sleep(60);
    expect(await claimIds(runId, 'alive', 2, 10)).toEqual([ids[0], ids[1]]);
    // The attempt the dead holder was in is kept, as interrupted; a pending case has none to keep.
    const rows = await store.evaluations.resultsOf(runId);
    const [taken, fresh] = [rows.find((r) => r.id === ids[0]), rows.find((r) => r.id === ids[1])];
    expect(taken!.attempts).toEqual([expect.objectContaining({ attempt: 1, status: 'interrupted', error: { message: expect.stringMatching(/stopped before it ended/) } })]);
    expect(fresh!.attempts).toEqual([]);
    expect(await store.evaluations.updateResult(ids[0]!, 'dead', { status: 'success', attempts: [] })).toBe(false);
    expect(await store.evaluations.updateResult(ids[0]!, 'alive', { status: 'success', attempts: [] })).toBe(true);
    expect(await store.evaluations.progress(runId)).toMatchObject({ pending: 2, running: 1, success: 1 });
  });
});

describe.runIf(TEST_POSTGRES_URL !== undefined)('claiming on PostgreSQL', () => {
  const clients: pg.Client[] = [];
  const pgClient = async () => {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    clients.push(client);
    return client;
  };
  afterAll(async () => {
    for (const client of clients) await client.end();
  });

  it('never waits on another claim in progress: cases and slots it has locked are skipped', async () => {
    const { runId, ids } = await run(4);
    // Make the run's slots, then hold what an unfinished claim holds: a case and a slot, and the run's row.
    expect(await claimIds(runId, 'a', 1, 3)).toEqual([ids[0]]);
    const other = await pgClient();
    await other.query('begin');
    await other.query('select id from evaluation_runs where id = $1 for update', [runId]);
    await other.query('select id from evaluation_results where id = $1 for update', [ids[1]]);
    const { rows } = await other.query('select slot from evaluation_slots where run_id = $1 and result_id is null order by slot limit 1 for update', [runId]);
    expect(rows).toHaveLength(1);
    // One slot left of three: taken with the next case the other claim has not locked.
    const claimed = await Promise.race([claimIds(runId, 'b', 5, 3), sleep(5_000).then(() => 'waited')]);
    expect(claimed).toEqual([ids[2]]);
    await other.query('rollback');
    // The other claim gave its slot and case back: they are free again, and then the cap is reached.
    expect(await claimIds(runId, 'c', 5, 3)).toEqual([ids[1]]);
    expect(await claimIds(runId, 'c', 5, 3)).toEqual([]);
    // A run that ended keeps no slots.
    const slots = async () => (await other.query('select count(*)::int as n from evaluation_slots where run_id = $1', [runId])).rows[0].n;
    expect(await slots()).toBe(3);
    expect(await store.evaluations.updateRun(runId, { status: 'success', ended_at: new Date().toISOString() })).toBe(true);
    expect(await slots()).toBe(0);
  });

  it('holds the cap across many claimers racing on separate connections', async () => {
    const n = 120;
    const cap = 5;
    const { runId } = await run(n);
    const stores = await Promise.all(Array.from({ length: 3 }, async () => openStore({ dataDir: await tempDir('claims-race'), databaseUrl: database.url })));
    let live = 0;
    let most = 0;
    const done = new Set<string>();
    try {
      await Promise.all(
        stores.flatMap((replica, r) =>
          Array.from({ length: 6 }, async () => {
            while (done.size < n) {
              const got = await replica.evaluations.claim(runId, `r${r}`, 2, cap, 60_000);
              if (got.length === 0) {
                await sleep(2);
                continue;
              }
              live += got.length;
              most = Math.max(most, live);
              await sleep(5);
              for (const c of got) {
                expect(done.has(c.id)).toBe(false);
                done.add(c.id);
                live--;
                expect(await replica.evaluations.updateResult(c.id, `r${r}`, { status: 'success', attempts: [] })).toBe(true);
              }
            }
          }),
        ),
      );
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    expect(done.size).toBe(n);
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(cap);
  });
});
