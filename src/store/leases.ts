import type { Kysely, Selectable } from 'kysely';
import { nowIso } from './columns.ts';
import type { Database, SessionLeasesTable } from './schema.ts';

/** The one-live-turn-per-session lease (design.md §5): a row with an expiry its holder renews. */
export interface Lease {
  project_id: string;
  session_id: string;
  turn_id: string;
  holder: string;
  expires_at: string;
  cancel_requested: boolean;
  started_at: string;
}

export type Acquired = { acquired: true; lease: Lease; expired?: Lease } | { acquired: false; current: Lease };

function toLease(row: Selectable<SessionLeasesTable>): Lease {
  return { ...row, cancel_requested: row.cancel_requested === 1 };
}

const inMs = (ms: number) => new Date(Date.now() + ms).toISOString();

export function createLeasesRepo(db: Kysely<Database>) {
  const pk = (projectId: string, sessionId: string) =>
    db.selectFrom('session_leases').selectAll().where('project_id', '=', projectId).where('session_id', '=', sessionId);

  async function get(projectId: string, sessionId: string): Promise<Lease | undefined> {
    const row = await pk(projectId, sessionId).executeTakeFirst();
    return row && toLease(row);
  }

  /** The leases held on any of these sessions. */
  async function ofSessions(projectId: string, sessionIds: readonly string[]): Promise<Lease[]> {
    if (sessionIds.length === 0) return [];
    const rows = await db.selectFrom('session_leases').selectAll().where('project_id', '=', projectId).where('session_id', 'in', sessionIds).execute();
    return rows.map(toLease);
  }

  /**
   * Takes the session for a turn unless a live lease holds it. Each step is one statement, so two
   * processes racing for a free (or expired) session cannot both win. A lease taken over from an
   * expired holder is returned as `expired`, so its turn can be recorded as interrupted.
   */
  async function acquire(input: { projectId: string; sessionId: string; turnId: string; holder: string; ttlMs: number }): Promise<Acquired> {
    const now = nowIso();
    const lease = { turn_id: input.turnId, holder: input.holder, expires_at: inMs(input.ttlMs), cancel_requested: 0, started_at: now };
    // The common case, a free session, costs one statement.
    const fresh = await db
      .insertInto('session_leases')
      .values({ project_id: input.projectId, session_id: input.sessionId, ...lease })
      .onConflict((oc) => oc.columns(['project_id', 'session_id']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (fresh) return { acquired: true, lease: toLease(fresh) };
    const current = await get(input.projectId, input.sessionId);
    if (!current) return acquire(input);
    if (current.expires_at >= now) return { acquired: false, current };
    const taken = await db
      .updateTable('session_leases')
      .set(lease)
      .where('project_id', '=', input.projectId)
      .where('session_id', '=', input.sessionId)
      .where('turn_id', '=', current.turn_id)
      .where('expires_at', '<', now)
      .returningAll()
      .executeTakeFirst();
    // Another process took the expired lease first: whoever holds it now is the current turn.
    if (!taken) return acquire(input);
    return { acquired: true, lease: toLease(taken), expired: current };
  }

  /** Extends the lease; undefined when it was lost (expired and taken, or released). */
  async function renew(projectId: string, sessionId: string, turnId: string, ttlMs: number): Promise<Lease | undefined> {
    const row = await db
      .updateTable('session_leases')
      .set({ expires_at: inMs(ttlMs) })
      .where('project_id', '=', projectId)
      .where('session_id', '=', sessionId)
      .where('turn_id', '=', turnId)
      .returningAll()
      .executeTakeFirst();
    return row && toLease(row);
  }

  async function release(projectId: string, sessionId: string, turnId: string): Promise<void> {
    await db.deleteFrom('session_leases').where('project_id', '=', projectId).where('session_id', '=', sessionId).where('turn_id', '=', turnId).execute();
  }

  /** Asks the holder of a turn to stop it; the holder sees the flag at its next renewal. */
  async function requestCancel(projectId: string, sessionId: string, turnId: string): Promise<boolean> {
    const result = await db
      .updateTable('session_leases')
      .set({ cancel_requested: 1 })
      .where('project_id', '=', projectId)
      .where('session_id', '=', sessionId)
      .where('turn_id', '=', turnId)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Leases whose holders stopped renewing them, oldest first. */
  async function listExpired(limit = 100): Promise<Lease[]> {
    const rows = await db.selectFrom('session_leases').selectAll().where('expires_at', '<', nowIso()).orderBy('expires_at').limit(limit).execute();
    return rows.map(toLease);
  }

  /** Drops a lease whose holder stopped renewing it, unless it was renewed or taken meanwhile. */
  async function releaseExpired(lease: Pick<Lease, 'project_id' | 'session_id' | 'turn_id'>): Promise<boolean> {
    const result = await db
      .deleteFrom('session_leases')
      .where('project_id', '=', lease.project_id)
      .where('session_id', '=', lease.session_id)
      .where('turn_id', '=', lease.turn_id)
      .where('expires_at', '<', nowIso())
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Drops every lease: only for a process that knows it is the database's sole user, at start. */
  async function releaseAll(): Promise<number> {
    const result = await db.deleteFrom('session_leases').executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  return { get, ofSessions, acquire, renew, release, requestCancel, listExpired, releaseExpired, releaseAll };
}

export type LeasesRepo = ReturnType<typeof createLeasesRepo>;
