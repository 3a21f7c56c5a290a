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
  /** Creates the session on first use, otherwise marks it as used now; one statement, so no race. */
  async function touch(projectId: string, sessionId: string): Promise<SessionRecord> {
    const at = nowIso();
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

  return { touch, get };
}

export type SessionsRepo = ReturnType<typeof createSessionsRepo>;
