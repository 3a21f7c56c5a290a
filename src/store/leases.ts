import { sql, type Kysely, type QueryCreator, type Selectable } from 'kysely';
import { dbOffset, dbTime, dbTimePlus, type Engine } from './columns.ts';
import { prepare } from './prepared.ts';
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
  /** Not expired, by the database's clock when it was read (never a replica's own). */
  live: boolean;
}

export type Acquired = { acquired: true; lease: Lease; expired?: Lease } | { acquired: false; current: Lease };

type Row = Selectable<SessionLeasesTable> & { live: number | boolean };

function toLease(row: Row): Lease {
  return { ...row, cancel_requested: row.cancel_requested === 1, live: row.live === true || row.live === 1 };
}

export type LeaseKeys = { project_id: string; session_id: string; turn_id: string };

/** Gives back the lease `turn_id` holds, if it still does: on its own, and with the turn's ending (turns.ts). */
export function deleteLease(qb: QueryCreator<Database>, keys: LeaseKeys) {
  return qb.deleteFrom('session_leases').where('project_id', '=', keys.project_id).where('session_id', '=', keys.session_id).where('turn_id', '=', keys.turn_id);
}

/**
 * Every expiry is written and read on the database's clock (`dbTime`): a replica whose clock runs
 * ahead would otherwise take the sessions of live turns for abandoned, and one behind would hold
 * on to leases past their time.
 */
export function createLeasesRepo(db: Kysely<Database>, engine: Engine) {
  const now = () => dbTime(engine);
  const inMs = (ms: number) => dbTime(engine, ms);
  const live = () => sql<number | boolean>`expires_at > ${now()}`.as('live');
  const leases = () => db.selectFrom('session_leases').selectAll().select(live());

  // Every turn takes a lease and gives it back: both prepared once (prepared.ts).
  const takeFree = prepare(db, ['project_id', 'session_id', 'turn_id', 'holder', 'expires_in'], ({ expires_in, ...keys }: LeaseKeys & { holder: string; expires_in: number | string }) =>
    db
      .insertInto('session_leases')
      .values({ ...keys, expires_at: dbTimePlus(engine, expires_in), cancel_requested: 0, started_at: now() })
      .onConflict((oc) => oc.columns(['project_id', 'session_id']).doNothing())
      .returningAll()
      .returning(sql<boolean>`true`.as('live')),
  );
  const giveBack = prepare(db, ['project_id', 'session_id', 'turn_id'], (keys: LeaseKeys) => deleteLease(db, keys));

  async function get(projectId: string, sessionId: string): Promise<Lease | undefined> {
    const row = await leases().where('project_id', '=', projectId).where('session_id', '=', sessionId).executeTakeFirst();
    return row && toLease(row);
  }

  /** The leases held on any of these sessions. */
  async function ofSessions(projectId: string, sessionIds: readonly string[]): Promise<Lease[]> {
    if (sessionIds.length === 0) return [];
    const rows = await leases().where('project_id', '=', projectId).where('session_id', 'in', sessionIds).execute();
    return rows.map(toLease);
  }

  /**
   * Takes the session for a turn unless a live lease holds it. Each step is one statement, so two
   * processes racing for a free (or expired) session cannot both win. A lease taken over from an
   * expired holder is returned as `expired`, so its turn can be recorded as interrupted.
   */
  async function acquire(input: { projectId: string; sessionId: string; turnId: string; holder: string; ttlMs: number }): Promise<Acquired> {
    // The common case, a free session, costs one statement.
    const [fresh] = (
      await takeFree({ project_id: input.projectId, session_id: input.sessionId, turn_id: input.turnId, holder: input.holder, expires_in: dbOffset(engine, input.ttlMs) })
    ).rows;
    if (fresh) return { acquired: true, lease: toLease(fresh) };
    const lease = { turn_id: input.turnId, holder: input.holder, expires_at: inMs(input.ttlMs), cancel_requested: 0, started_at: now() };
    const current = await get(input.projectId, input.sessionId);
    if (!current) return acquire(input);
    if (current.live) return { acquired: false, current };
    const taken = await db
      .updateTable('session_leases')
      .set(lease)
      .where('project_id', '=', input.projectId)
      .where('session_id', '=', input.sessionId)
      .where('turn_id', '=', current.turn_id)
      .where('expires_at', '<=', now())
      .returningAll()
      .returning(sql<boolean>`true`.as('live'))
      .executeTakeFirst();
    // Another process took the expired lease first: whoever holds it now is the current turn.
    if (!taken) return acquire(input);
    return { acquired: true, lease: toLease(taken), expired: current };
  }

  /**
   * Extends every lease `holder` holds for these turns, in one statement: a replica renews all its
   * turns' leases at once, not one statement per turn. A turn missing from the answer lost its
   * lease (it expired and was taken, or was released).
   */
  async function renewHeld(holder: string, turnIds: readonly string[], ttlMs: number): Promise<Lease[]> {
    if (turnIds.length === 0) return [];
    const rows = await db
      .updateTable('session_leases')
      .set({ expires_at: inMs(ttlMs) })
      .where('holder', '=', holder)
      .where('turn_id', 'in', turnIds)
      .returningAll()
      .returning(sql<boolean>`true`.as('live'))
      .execute();
    return rows.map(toLease);
  }

  async function release(projectId: string, sessionId: string, turnId: string): Promise<void> {
    await giveBack({ project_id: projectId, session_id: sessionId, turn_id: turnId });
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
    const rows = await leases().where('expires_at', '<=', now()).orderBy('expires_at').limit(limit).execute();
    return rows.map(toLease);
  }

  /** Drops a lease whose holder stopped renewing it, unless it was renewed or taken meanwhile. */
  async function releaseExpired(lease: Pick<Lease, 'project_id' | 'session_id' | 'turn_id'>): Promise<boolean> {
    const result = await db
      .deleteFrom('session_leases')
      .where('project_id', '=', lease.project_id)
      .where('session_id', '=', lease.session_id)
      .where('turn_id', '=', lease.turn_id)
      .where('expires_at', '<=', now())
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Drops every lease: only for a process that knows it is the database's sole user, at start. */
  async function releaseAll(): Promise<number> {
    const result = await db.deleteFrom('session_leases').executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  return { get, ofSessions, acquire, renewHeld, release, requestCancel, listExpired, releaseExpired, releaseAll };
}

export type LeasesRepo = ReturnType<typeof createLeasesRepo>;
