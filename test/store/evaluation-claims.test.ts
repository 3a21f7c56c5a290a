import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.ts';
import { freshDatabase, type TestDatabase } from '../support/database.ts';
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
