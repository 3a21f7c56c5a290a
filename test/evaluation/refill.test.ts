import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, template, type Harness } from '../support/harness.ts';
import { createWorkflow } from '../configs/client.ts';
import { createTestset, runEnded, startRun } from './client.ts';

/**
 * A case that ends makes room for the next at once, not at the driver's next look around: with
 * AGENTD_EVAL_POLL_MS an hour, a run of more cases than its batch ends only if every ending case
 * wakes the driver.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ env: { AGENTD_EVAL_POLL_MS: '3600000' }, script: { text: 'done', latencyMs: 20 } });
});
afterAll(async () => h.close());

describe('an evaluation run with more cases than its batch', () => {
  it('starts the next case as soon as one ends, never more than the batch at once', async () => {
    const appRevision = (await createWorkflow(h, 'refill-target', { agent: template() })).revision.id;
    const rows = Array.from({ length: 6 }, (_, i) => ({ data: { messages: [{ role: 'user', content: `case ${i}` }] } }));
    const revision = (await createTestset(h, { name: 'refill', data: { testcases: rows } })).revision_id;
    h.model.reset();
    const created = await startRun(h, revision, appRevision, { concurrency: { batch_size: 2 } });
    const run = await runEnded(h, created.id);
    expect(run.data.status).toBe('success');
    expect(run.data.progress).toMatchObject({ total: 6, success: 6 });
    expect(h.model.requests).toHaveLength(6);
    expect(h.model.peakInFlight).toBe(2);
  });
});
