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
    const b = await startHarness({ dataDir: a.dataDir, databaseUrl: a.databaseUrl, listenUrl: a.listenUrl });
    try {
      const session = sid('cross');
      a.model.script({ toolCalls: [{ name: 'write', input: { path: 'cross.txt', content: 'approved elsewhere' } }] });
      b.model.script({ text: 'written on B' });
      const paused = await readJson(await a.invoke(invokeBody([{ role: 'user', content: 'write it' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: session })));
      expect(paused.data.outputs.stop_reason).toBe('paused');
      const interaction = paused.data.outputs.pending_interaction.id;

      const res = await b.respond(interaction, { approved: true });
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

  it('is refused, and stays pending, where the turn could not go on: the model key came with the paused request', async () => {
    const a = await startHarness();
    // A replica with no key of its own for OpenAI's API: the paused request had brought it.
    const keyless = await startHarness({ dataDir: a.dataDir, databaseUrl: a.databaseUrl, listenUrl: a.listenUrl, env: { OPENAI_API_KEY: '', OPENAI_BASE_URL: '' } });
    try {
      const session = sid('keyless');
      a.model.script([{ toolCalls: [{ name: 'write', input: { path: 'k.txt', content: 'kept' } }] }, { text: 'written' }]);
      const body = { ...invokeBody([{ role: 'user', content: 'write it' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: session }), secrets: { OPENAI_API_KEY: 'sk-from-the-request-only' } };
      const paused = await readJson(await a.invoke(body));
      const interaction = paused.data.outputs.pending_interaction.id;
      const refused = await keyless.respond(interaction, { approved: true });
      expect(refused.status).toBe(424);
      const { status } = (await refused.json()) as { status: { type: string; message: string } };
      expect(status.type).toBe('upstream-auth');
      expect(status.message).toMatch(/OPENAI_API_KEY.*never stored.*in band/);
      expect(status.message).not.toContain('sk-from-the-request-only');
      expect((await a.store.interactions.get(a.projectId, interaction))?.status).toBe('pending');

      // Where the key is, the same answer is taken and the turn goes on.
      expect((await a.respond(interaction, { approved: true })).status).toBe(200);
      await waitFor(async () => (await a.store.turns.listForSession(a.projectId, session, { limit: 1 }))[0]?.status === 'completed');
      expect(await readFile(`${a.sessionDir(session)}/k.txt`, 'utf8')).toBe('kept');
    } finally {
      await keyless.close();
      await a.close();
    }
  });
});
