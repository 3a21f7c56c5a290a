import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.ts';
import { createMigrator, migrateToLatest } from '../../src/store/migrate.ts';
import { freshDatabase, TEST_POSTGRES_URL } from '../support/database.ts';
import { tempDir } from './helpers.ts';

const database = await freshDatabase();
afterAll(() => database.drop());
const store = await openStore({ dataDir: await tempDir('paused-states'), databaseUrl: database.url });
afterAll(() => store.close());
const state = { template: { llm: { provider: 'openai', model: 'm' } }, history: [{ role: 'user', content: 'go' }] };

function interaction(projectId: string, sessionId: string, turnId: string) {
  const toolCallId = `call_${randomUUID()}`;
  return store.interactions.create({
    id: randomUUID(),
    project_id: projectId,
    session_id: sessionId,
    turn_id: turnId,
    kind: 'user_approval',
    tool_call_id: toolCallId,
    request: { tool: 'write', args: {}, tool_call_id: toolCallId },
  });
}

/** The schema the store's migrations live in: PostgreSQL's of this test, none on SQLite. */
async function migrationSchema(of: Store): Promise<string | undefined> {
  if (!TEST_POSTGRES_URL) return undefined;
  return (await sql<{ schema: string }>`select current_schema() as schema`.execute(of.db)).rows[0]!.schema;
}

describe('paused states', () => {
  it('keeps a turn’s state once, read back only within its project', async () => {
    const project = (await store.projects.ensure('paused-a')).id;
    const other = (await store.projects.ensure('paused-b')).id;
    await store.pausedStates.save({ projectId: project, sessionId: 's1', turnId: 'turn-a', state });
    expect(await store.pausedStates.get(project, 'turn-a')).toEqual(state);
    expect(await store.pausedStates.get(other, 'turn-a')).toBeUndefined();
    expect(await store.pausedStates.get(project, 'no-such-turn')).toBeUndefined();
    // An interaction's record neither carries nor rewrites it.
    const record = await interaction(project, 's1', 'turn-a');
    expect('state' in record).toBe(false);
    await store.interactions.transition(project, record.id, { from: ['pending'], to: 'responded', answer: { approved: true } });
    expect(await store.pausedStates.get(project, 'turn-a')).toEqual(state);
  });

  it('are removed a session at a time, once its pauses are settled', async () => {
    const project = (await store.projects.ensure('paused-settled')).id;
    await store.pausedStates.save({ projectId: project, sessionId: 'settled', turnId: 'turn-1', state });
    await store.pausedStates.save({ projectId: project, sessionId: 'settled', turnId: 'turn-2', state });
    await store.pausedStates.save({ projectId: project, sessionId: 'open', turnId: 'turn-3', state });
    await store.pausedStates.removeSession(project, 'settled');
    expect(await store.pausedStates.get(project, 'turn-1')).toBeUndefined();
    expect(await store.pausedStates.get(project, 'turn-2')).toBeUndefined();
    expect(await store.pausedStates.get(project, 'turn-3')).toEqual(state);
  });

  it('goes with its session when the session is removed', async () => {
    const project = (await store.projects.ensure('paused-remove')).id;
    await store.sessions.touch(project, 'gone');
    await store.pausedStates.save({ projectId: project, sessionId: 'gone', turnId: 'turn-gone', state });
    await store.pausedStates.save({ projectId: project, sessionId: 'kept', turnId: 'turn-kept', state });
    expect(await store.sessions.remove(project, 'gone')).toBe(true);
    expect(await store.pausedStates.get(project, 'turn-gone')).toBeUndefined();
    expect(await store.pausedStates.get(project, 'turn-kept')).toEqual(state);
  });

  it('is moved out of the interactions of a database made before it had a table, once per turn', async () => {
    const project = (await store.projects.ensure('paused-migrated')).id;
    const schema = await migrationSchema(store);
    const down = await createMigrator(store.db, schema).migrateTo('0012_running_claims_index');
    expect(down.error).toBeUndefined();
    // As the interactions of a paused turn were stored then: the state in each of them.
    const old = [await interaction(project, 's1', 'old-turn'), await interaction(project, 's1', 'old-turn'), await interaction(project, 's1', 'no-state')];
    const text = JSON.stringify(state);
    await sql`update interactions set state_json = ${text} where turn_id = ${'old-turn'}`.execute(store.db);
    expect(await migrateToLatest(store.db, schema)).toEqual(['0013_paused_states', '0014_interaction_lookups']);
    expect(await store.pausedStates.get(project, 'old-turn')).toEqual(state);
    expect(await store.pausedStates.get(project, 'no-state')).toBeUndefined();
    const rows = await store.db.selectFrom('paused_states').select('turn_id').where('project_id', '=', project).execute();
    expect(rows.map((r) => r.turn_id)).toEqual(['old-turn']);
    for (const record of old) expect(await store.interactions.get(project, record.id)).toEqual(record);
  });
});
