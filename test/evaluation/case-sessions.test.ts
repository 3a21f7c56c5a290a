import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { okJsonText, startHarness, template, type Harness } from '../support/harness.ts';
import { configsApi, createWorkflow } from '../configs/client.ts';
import { createTestset, runEnded, runResults, startRun } from './client.ts';

/**
 * An evaluation case runs its turn in a session of its own that nobody knows of before the case
 * ends: it takes no lease and writes nothing while it runs, and the session and its ended turn
 * are recorded when it ends, as readable as any invoked turn's.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ script: { text: 'case answer', latencyMs: 300 } });
});
afterAll(async () => h.close());

describe("an evaluation case's session", () => {
  it('holds no lease and no running turn while the case runs, and the whole turn once it has ended', async () => {
    const appRevision = (await createWorkflow(h, 'case-sessions-target', { agent: template() })).revision.id;
    const rows = [{ data: { messages: [{ role: 'user', content: 'first' }] } }, { data: { messages: [{ role: 'user', content: 'second' }] } }];
    const revision = (await createTestset(h, { name: 'case-sessions', data: { testcases: rows } })).revision_id;
    const created = await startRun(h, revision, appRevision, { concurrency: { batch_size: 2 } });

    while (h.model.inFlight < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    const db = h.store.db;
    expect(await db.selectFrom('session_leases').selectAll().where('session_id', 'like', 'eval:%').execute()).toEqual([]);
    expect(await db.selectFrom('turns').selectAll().where('session_id', 'like', 'eval:%').execute()).toEqual([]);

    const run = await runEnded(h, created.id);
    expect(run.data.status).toBe('success');
    for (const result of await runResults(h, created.id)) {
      const { body } = await okJsonText(await configsApi(h, 'GET', `/sessions/${result.session_id}`));
      expect(body.turns).toHaveLength(1);
      const [turn] = body.turns;
      expect(turn).toMatchObject({ status: 'completed', trace_id: result.trace_id });
      expect(JSON.stringify(turn.outputs.messages)).toContain('case answer');
      expect(turn.request.evaluation).toMatchObject({ run_id: created.id, result_id: result.id });
      // Recorded at the end, but started when the case did: the model took 300 ms in between.
      expect(Date.parse(turn.ended_at) - Date.parse(turn.started_at)).toBeGreaterThanOrEqual(250);
      expect(body.live_turn).toBeUndefined();
      expect(body.session.created_at).toBe(turn.started_at);
    }
  });
});
