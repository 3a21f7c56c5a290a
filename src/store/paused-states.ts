import type { Kysely } from 'kysely';
import { nowIso } from './columns.ts';
import type { Database } from './schema.ts';

/**
 * A paused turn's state, once per turn: what any process needs to continue it when its
 * interactions are answered through the API. Kept apart from the interactions, whose rows change
 * with every answer while this, the whole conversation, is written once and read only to go on.
 */
export function createPausedStatesRepo(db: Kysely<Database>) {
  async function save(state: { projectId: string; sessionId: string; turnId: string; state: unknown }): Promise<void> {
    await db
      .insertInto('paused_states')
      .values({ turn_id: state.turnId, project_id: state.projectId, session_id: state.sessionId, state_json: JSON.stringify(state.state), created_at: nowIso() })
      .execute();
  }

  /** The state the turn paused with; undefined when it stored none (or is in another project). */
  async function get(projectId: string, turnId: string): Promise<unknown> {
    const row = await db.selectFrom('paused_states').select('state_json').where('turn_id', '=', turnId).where('project_id', '=', projectId).executeTakeFirst();
    return row && JSON.parse(row.state_json);
  }

  /** Removes every paused state of the session: once its pauses are all settled, none is read again. */
  async function removeSession(projectId: string, sessionId: string): Promise<void> {
    await db.deleteFrom('paused_states').where('project_id', '=', projectId).where('session_id', '=', sessionId).execute();
  }

  return { save, get, removeSession };
}

export type PausedStatesRepo = ReturnType<typeof createPausedStatesRepo>;
