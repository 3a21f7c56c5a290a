import type { Kysely, QueryCreator } from 'kysely';
import { EVALUATION_SESSION_PREFIX } from '../contract/sessions.ts';
import { dbTime, nowIso, type Engine } from './columns.ts';
import { decodeCursor, pageSize, toPage, type Page, type PageRequest } from './cursor.ts';
import { prepare } from './prepared.ts';
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

export interface SessionFilter {
  /** Only sessions whose id starts with this text (case as given). */
  idPrefix?: string | undefined;
  /** `pending`: an interaction waits for an answer; `live`: a turn holds the session now. */
  status?: 'pending' | 'live' | undefined;
}

/** Creates the session, or marks it as used at `at`: on its own, and with a turn's row (turns.ts). */
export function upsertSession(qb: QueryCreator<Database>, { project_id, id, at }: { project_id: string; id: string; at: string }) {
  return qb
    .insertInto('sessions')
    .values({ project_id, id, created_at: at, updated_at: at })
    .onConflict((oc) => oc.columns(['project_id', 'id']).doUpdateSet({ updated_at: at }));
}

export function createSessionsRepo(db: Kysely<Database>, engine: Engine) {
  // On every turn's path: prepared once (prepared.ts).
  const upsert = prepare(db, ['project_id', 'id', 'at'], (values: { project_id: string; id: string; at: string }) => upsertSession(db, values).returningAll());

  /** Creates the session on first use, otherwise marks it as used at `at` (now); one statement, so no race. */
  async function touch(projectId: string, sessionId: string, at = nowIso()): Promise<SessionRecord> {
    const [row] = (await upsert({ project_id: projectId, id: sessionId, at })).rows;
    return toSession(row!);
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
   * A project's sessions, newest first, by keyset cursor (pages never skip or repeat one, whatever
   * is created meanwhile), evaluation cases' left out.
   */
  async function list(projectId: string, page: PageRequest, filter: SessionFilter = {}): Promise<Page<SessionRecord>> {
    const limit = pageSize(page.limit);
    let query = db
      .selectFrom('sessions')
      .selectAll()
      .where('project_id', '=', projectId)
      .where((eb) => eb(eb.fn('substr', ['id', eb.lit(1), eb.lit(EVALUATION_SESSION_PREFIX.length)]), '<>', EVALUATION_SESSION_PREFIX));
    if (filter.idPrefix) {
      const prefix = filter.idPrefix;
      query = query.where((eb) => eb(eb.fn('substr', ['id', eb.lit(1), eb.val(prefix.length)]), '=', prefix));
    }
    if (filter.status === 'pending') {
      query = query.where(({ exists, selectFrom }) =>
        exists(
          selectFrom('interactions as i')
            .select('i.id')
            .whereRef('i.project_id', '=', 'sessions.project_id')
            .whereRef('i.session_id', '=', 'sessions.id')
            .where('i.status', '=', 'pending'),
        ),
      );
    } else if (filter.status === 'live') {
      query = query.where(({ exists, selectFrom }) =>
        exists(
          selectFrom('session_leases as l')
            .select('l.turn_id')
            .whereRef('l.project_id', '=', 'sessions.project_id')
            .whereRef('l.session_id', '=', 'sessions.id')
            .where('l.expires_at', '>', dbTime(engine)),
        ),
      );
    }
    if (page.cursor !== undefined) {
      const after = decodeCursor(page.cursor);
      query = query.where((eb) => eb.or([eb('created_at', '<', after.at), eb.and([eb('created_at', '=', after.at), eb('id', '<', after.id)])]));
    }
    const rows = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
    return toPage(rows, limit, (row) => ({ at: row.created_at, id: row.id }), toSession);
  }

  /**
   * Deletes the session and everything recorded under it (turns, interactions, paused states, its lease) in one
   * transaction, so a failure leaves the session whole rather than half gone. True when there was
   * anything to delete. The session folder on disk is the caller's to remove.
   */
  async function remove(projectId: string, sessionId: string): Promise<boolean> {
    return db.transaction().execute(async (trx) => {
      let removed = 0;
      for (const table of ['interactions', 'paused_states', 'turns', 'session_leases'] as const) {
        const result = await trx.deleteFrom(table).where('project_id', '=', projectId).where('session_id', '=', sessionId).executeTakeFirst();
        removed += Number(result.numDeletedRows);
      }
      const session = await trx.deleteFrom('sessions').where('project_id', '=', projectId).where('id', '=', sessionId).executeTakeFirst();
      return removed + Number(session.numDeletedRows) > 0;
    });
  }

  return { touch, get, list, remove };
}

export type SessionsRepo = ReturnType<typeof createSessionsRepo>;
