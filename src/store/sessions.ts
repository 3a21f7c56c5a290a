import type { Kysely } from 'kysely';
import { nowIso } from './columns.ts';
import type { Database } from './schema.ts';

export interface SessionRecord {
  project_id: string;
  id: string;
  created_at: string;
  updated_at: string;
}

function toSession(row: SessionRecord): SessionRecord {
  return { project_id: row.project_id, id: row.id, created_at: row.created_at, updated_at: row.updated_at };
}

export function createSessionsRepo(db: Kysely<Database>) {
  /** Creates the session on first use, otherwise marks it as used at `at` (now); one statement, so no race. */
  async function touch(projectId: string, sessionId: string, at = nowIso()): Promise<SessionRecord> {
    const row = await db
      .insertInto('sessions')
      .values({ project_id: projectId, id: sessionId, created_at: at, updated_at: at })
      .onConflict((oc) => oc.columns(['project_id', 'id']).doUpdateSet({ updated_at: at }))
      .returningAll()
      .executeTakeFirstOrThrow();
    return toSession(row);
  }

  async function get(projectId: string, sessionId: string): Promise<SessionRecord | undefined> {
    const row = await db
      .selectFrom('sessions')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('id', '=', sessionId)
      .executeTakeFirst();
    return row && toSession(row);
  }

  /**
   * Deletes the session and everything recorded under it (turns, interactions, its lease) in one
   * transaction, so a failure leaves the session whole rather than half gone. True when there was
   * anything to delete. The session folder on disk is the caller's to remove.
   */
  async function remove(projectId: string, sessionId: string): Promise<boolean> {
    return db.transaction().execute(async (trx) => {
      let removed = 0;
      for (const table of ['interactions', 'turns', 'session_leases'] as const) {
        const result = await trx.deleteFrom(table).where('project_id', '=', projectId).where('session_id', '=', sessionId).executeTakeFirst();
        removed += Number(result.numDeletedRows);
      }
      const session = await trx.deleteFrom('sessions').where('project_id', '=', projectId).where('id', '=', sessionId).executeTakeFirst();
      return removed + Number(session.numDeletedRows) > 0;
    });
  }

  return { touch, get, remove };
}

export type SessionsRepo = ReturnType<typeof createSessionsRepo>;
