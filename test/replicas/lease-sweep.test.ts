import { describe, expect, it } from 'vitest';
import { sid, startHarness } from '../support/harness.ts';
import { waitFor } from '../sessions-api/client.ts';

/**
 * A replica that dies mid-turn leaves a running turn and a lease nobody renews. Replicas on
 * PostgreSQL cannot clear each other's leases at start, so each sweeps lapsed ones (issue 7): the
 * session is freed and the cut-off turn recorded `interrupted`, while live leases are left alone.
 */
describe('sweeping lapsed session leases', () => {
  it('frees sessions whose holder stopped renewing and interrupts their turns, and only those', async () => {
    const h = await startHarness();
    try {
      const { store } = h;
      const dead = sid('dead');
      const alive = sid('alive');
      for (const [session, turnId, ttlMs] of [[dead, `${dead}-turn`, 1], [alive, `${alive}-turn`, 60_000]] as const) {
        await store.sessions.touch(h.projectId, session);
        await store.turns.create({ id: turnId, project_id: h.projectId, session_id: session, trace_id: '0'.repeat(32), span_id: '0'.repeat(16) });
        const got = await store.leases.acquire({ projectId: h.projectId, sessionId: session, turnId, holder: 'another-replica', ttlMs });
        expect(got.acquired).toBe(true);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));

      const stop = h.app.turns.sweepExpiredLeases(60_000);
      try {
        // The sweep frees the lease and then marks the turn: wait for the second.
        await waitFor(async () => (await store.turns.get(h.projectId, `${dead}-turn`))?.status === 'interrupted', 'the lapsed turn to be interrupted');
      } finally {
        stop();
      }
      expect(await store.leases.get(h.projectId, dead)).toBeUndefined();
      expect((await store.leases.get(h.projectId, alive))?.holder).toBe('another-replica');
      expect((await store.turns.get(h.projectId, `${alive}-turn`))?.status).toBe('running');
    } finally {
      await h.close();
    }
  });
});
