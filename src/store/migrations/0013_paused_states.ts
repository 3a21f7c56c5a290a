import { sql, type Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * A paused turn's state (the whole conversation, 225 KB at 1,000 messages) in a table of its own,
 * once per turn, instead of a copy in each of the turn's interactions. SQLite rewrites a whole row
 * on any update, so every change of an interaction's status wrote the conversation again, and
 * every listing of interactions read it (BENCHMARKS.md). A turn's interactions all held the same
 * state, so any one of them is its turn's.
 */
export const pausedStates: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema
      .createTable('paused_states')
      .addColumn('turn_id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull())
      .addColumn('session_id', 'text', (c) => c.notNull())
      .addColumn('state_json', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('paused_states_session_idx').on('paused_states').columns(['project_id', 'session_id']).execute();
    await sql`
      insert into paused_states (turn_id, project_id, session_id, state_json, created_at)
      select turn_id, min(project_id), min(session_id), min(state_json), min(created_at)
      from interactions where state_json is not null group by turn_id
    `.execute(db);
    await db.schema.alterTable('interactions').dropColumn('state_json').execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.alterTable('interactions').addColumn('state_json', 'text').execute();
    await sql`update interactions set state_json = (select state_json from paused_states p where p.turn_id = interactions.turn_id)`.execute(db);
    await db.schema.dropTable('paused_states').execute();
  },
};
