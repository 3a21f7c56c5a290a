import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { builtin, invokeBody, readJson, sid, startHarness, template } from '../support/harness.ts';
import { waitFor } from '../sessions-api/client.ts';

/**
 * An approval answered on another replica (issue 7): the turn pauses on replica A, the answer
 * arrives at replica B, and B continues the turn from the state stored with the pause — A is not
 * involved. Two agentd apps on one database and one data folder (PostgreSQL in the `postgres`
 * project, a shared SQLite file in the `sqlite` one).
 */

describe('an interaction answered on another replica', () => {
  it('is continued by the replica that got the answer', async () => {
    const a = await startHarness();
    const b = await startHarness({ dataDir: a.dataDir, databaseUrl: a.databaseUrl });
    try {
      const session = sid('cross');
      a.model.script({ toolCalls: [{ name: 'write', input: { path: 'cross.txt', content: 'approved elsewhere' } }] });
      b.model.script({ text: 'written on B' });
      const paused = await readJson(await a.invoke(invokeBody([{ role: 'user', content: 'write it' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: session })));
      expect(paused.data.outputs.stop_reason).toBe('paused');
      const interaction = paused.data.outputs.pending_interaction.id;

      const res = await fetch(`${b.url}/api/sessions/interactions/${interaction}/respond?project_id=${b.projectId}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `ApiKey ${b.apiKey}` },
        body: JSON.stringify({ answer: { approved: true } }),
      });
      expect(res.status).toBe(200);
      await waitFor(async () => (await b.store.turns.listForSession(b.projectId, session, { limit: 1 }))[0]?.status === 'completed');

      const [latest] = await b.store.turns.listForSession(b.projectId, session, { limit: 1 });
      expect(JSON.stringify(latest!.output)).toContain('written on B');
      expect(latest!.request).toMatchObject({ continues: paused.turn_id, via: 'out_of_band' });
      expect(await readFile(`${a.sessionDir(session)}/cross.txt`, 'utf8')).toBe('approved elsewhere');
      expect(a.model.requests).toHaveLength(1);
      expect(b.model.requests).toHaveLength(1);
      expect((await b.store.interactions.get(b.projectId, interaction))?.status).toBe('resolved');
    } finally {
      await b.close();
      await a.close();
    }
  });
});
