import type { Kysely, QueryResult, Selectable } from 'kysely';
import type { StopReason, Usage } from '../contract/events.ts';
import { fromJson, nowIso, toJson, withLazyJson, type Engine } from './columns.ts';
import { decodeCursor, pageSize, toPage, type Page, type PageRequest } from './cursor.ts';
import { deleteLease, type LeasesRepo } from './leases.ts';
import { prepare } from './prepared.ts';
import type { Database, TurnStatus, TurnsTable } from './schema.ts';
import { upsertSession, type SessionsRepo } from './sessions.ts';

type JsonObject = Record<string, unknown>;

export interface TurnRecord {
  id: string;
  project_id: string;
  session_id: string;
  status: TurnStatus;
  stop_reason: StopReason | null;
  trace_id: string;
  span_id: string;
  parent_span_id: string | null;
  /** What the caller sent that is worth keeping with the turn: tags, meta, links, references. */
  request: JsonObject | null;
  /** The folded result (messages, pending interaction, …). */
  output: JsonObject | null;
  usage: Usage | null;
  error: JsonObject | null;
  started_at: string;
  ended_at: string | null;
}

/** What a listing shows of a turn. */
export type TurnSummary = Pick<TurnRecord, 'id' | 'status' | 'stop_reason' | 'usage' | 'started_at' | 'ended_at'>;

export interface NewTurn {
  id: string;
  project_id: string;
  session_id: string;
  trace_id: string;
  span_id: string;
  parent_span_id?: string | null;
  request?: JsonObject | null;
  /** Now, unless the turn is recorded only once it has ended. */
  started_at?: string;
}

export interface TurnEnd {
  status: Exclude<TurnStatus, 'running'>;
  stop_reason?: StopReason | null;
  output?: JsonObject | null;
  usage?: Usage | null;
  error?: JsonObject | null;
}

type TurnRow = Selectable<TurnsTable>;
type Ending = Pick<TurnRow, 'id' | 'status' | 'stop_reason' | 'output_json' | 'usage_json' | 'error_json' | 'ended_at'>;

/** The session whose lease a turn's ending gives back. */
export type HeldLease = {
  project_id: string;
  session_id: string;
};

/** Every column of a turn's row: its prepared insert binds each of them. */
const COLUMNS = [
  'id',
  'project_id',
  'session_id',
  'status',
  'stop_reason',
  'trace_id',
  'span_id',
  'parent_span_id',
  'request_json',
  'output_json',
  'usage_json',
  'error_json',
  'started_at',
  'ended_at',
] as const satisfies readonly (keyof TurnRow)[];

function toTurn(row: TurnRow): TurnRecord {
  const record: TurnRecord = {
    id: row.id,
    project_id: row.project_id,
    session_id: row.session_id,
    status: row.status,
    stop_reason: row.stop_reason as StopReason | null,
    trace_id: row.trace_id,
    span_id: row.span_id,
    parent_span_id: row.parent_span_id,
    request: null,
    output: fromJson<JsonObject>(row.output_json),
    usage: fromJson<Usage>(row.usage_json),
    error: fromJson<JsonObject>(row.error_json),
    started_at: row.started_at,
    ended_at: row.ended_at,
  };
  return withLazyJson(record, 'request', row.request_json);
}

/**
 * A turn's row is written with its session's and its lease's: creating it creates or touches the
 * session, and ending it gives the lease back. Each pair costs one commit on SQLite, where both
 * statements go out in the same event-loop iteration and so share the driver's group, and one
 * statement on PostgreSQL, where the session's or the lease's part rides along as a data-modifying
 * CTE. Made one after the other, the pair cost a commit or a round trip more on every turn
 * (`npm run bench:store`, BENCHMARKS.md).
 */
export function createTurnsRepo(db: Kysely<Database>, engine: Engine, related: { sessions: Pick<SessionsRepo, 'touch'>; leases: Pick<LeasesRepo, 'release'> }) {
  // Every turn inserts its row and most finish it: both prepared once (prepared.ts).
  const insert = prepare(db, COLUMNS, (row: TurnRow) => db.insertInto('turns').values(row));
  const ended = prepare(db, ['id', 'status', 'stop_reason', 'output_json', 'usage_json', 'error_json', 'ended_at'], ({ id, ...ending }: Ending) =>
    db.updateTable('turns').set(ending).where('id', '=', id).where('status', '=', 'running'),
  );
  /** Inserts a turn's row and creates or touches its session, as of the turn's start. */
  const insertWithSession: (row: TurnRow) => Promise<unknown> =
    engine === 'postgres'
      ? prepare(db, COLUMNS, (row: TurnRow) =>
          db
            .with('touched', (qb) => upsertSession(qb, { project_id: row.project_id, id: row.session_id, at: row.started_at }))
            .insertInto('turns')
            .values(row),
        )
      : (row) => Promise.all([related.sessions.touch(row.project_id, row.session_id, row.started_at), insert(row)]);
  /** Ends a running turn's row and deletes the lease it held. */
  const endedReleasing: (ending: Ending & HeldLease) => Promise<QueryResult<unknown>> =
    engine === 'postgres'
      ? prepare(db, ['id', 'status', 'stop_reason', 'output_json', 'usage_json', 'error_json', 'ended_at', 'project_id', 'session_id'], ({ id, project_id, session_id, ...ending }: Ending & HeldLease) =>
          db
            .with('released', (qb) => deleteLease(qb, { project_id, session_id, turn_id: id }))
            .updateTable('turns')
            .set(ending)
            .where('id', '=', id)
            .where('status', '=', 'running'),
        )
      : async ({ project_id, session_id, ...ending }) => (await Promise.all([ended(ending), related.leases.release(project_id, session_id, ending.id)]))[0];

  /**
   * Records a turn as running, or, given how it ended, as the whole turn at once; its session is
   * created, or marked as used, as of the turn's start.
   */
  async function create(turn: NewTurn, end?: TurnEnd): Promise<TurnRecord> {
    const row = {
      id: turn.id,
      project_id: turn.project_id,
      session_id: turn.session_id,
      status: end?.status ?? ('running' as TurnStatus),
      stop_reason: end?.stop_reason ?? null,
      trace_id: turn.trace_id,
      span_id: turn.span_id,
      parent_span_id: turn.parent_span_id ?? null,
      request_json: toJson(turn.request),
      output_json: toJson(end?.output),
      usage_json: toJson(end?.usage),
      error_json: toJson(end?.error),
      started_at: turn.started_at ?? nowIso(),
      ended_at: end ? nowIso() : null,
    };
    await insertWithSession(row);
    return toTurn(row);
  }

  /**
   * Records how a running turn ended, and gives back the session's lease it held when `lease` is
   * given. Only a `running` turn changes, so the first ending wins: a late finish from a loop that
   * was cancelled or interrupted does not rewrite what happened. False when the turn does not exist
   * or had already ended. Nothing is read back: every turn ends here, and its caller already holds
   * what it wrote.
   */
  async function finish(id: string, end: TurnEnd, lease?: HeldLease): Promise<boolean> {
    const ending = {
      id,
      status: end.status,
      stop_reason: end.stop_reason ?? null,
      output_json: toJson(end.output),
      usage_json: toJson(end.usage),
      error_json: toJson(end.error),
      ended_at: nowIso(),
    };
    const result = await (lease ? endedReleasing({ ...ending, ...lease }) : ended(ending));
    return Number(result.numAffectedRows ?? 0) > 0;
  }

  async function get(projectId: string, id: string): Promise<TurnRecord | undefined> {
    const row = await db
      .selectFrom('turns')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toTurn(row);
  }

  const sessionTurns = (projectId: string, sessionId: string) =>
    db.selectFrom('turns').selectAll().where('project_id', '=', projectId).where('session_id', '=', sessionId);

  /** Newest first. `before` is a `started_at` timestamp (exclusive), for paging back in time. */
  async function listForSession(
    projectId: string,
    sessionId: string,
    options: { limit: number; before?: string },
  ): Promise<TurnRecord[]> {
    let query = sessionTurns(projectId, sessionId);
    if (options.before !== undefined) query = query.where('started_at', '<', options.before);
    const rows = await query
      .orderBy('started_at', 'desc')
      .orderBy('id', 'desc')
      .limit(Math.max(0, Math.trunc(options.limit)))
      .execute();
    return rows.map(toTurn);
  }

  /** Newest first, by keyset cursor: unlike `before`, two turns started in the same millisecond both appear. */
  async function listForSessionPage(projectId: string, sessionId: string, page: PageRequest): Promise<Page<TurnRecord>> {
    const limit = pageSize(page.limit);
    let query = sessionTurns(projectId, sessionId);
    if (page.cursor !== undefined) {
      const after = decodeCursor(page.cursor);
      query = query.where((eb) =>
        eb.or([eb('started_at', '<', after.at), eb.and([eb('started_at', '=', after.at), eb('id', '<', after.id)])]),
      );
    }
    const rows = await query.orderBy('started_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
    return toPage(rows, limit, (row) => ({ at: row.started_at, id: row.id }), toTurn);
  }

  /**
   * The latest turn of each of these sessions, for a listing: without its conversation, which a
   * list does not show and which may be large.
   */
  async function latestOf(projectId: string, sessionIds: readonly string[]): Promise<Map<string, TurnSummary>> {
    if (sessionIds.length === 0) return new Map();
    const rows = await db
      .selectFrom('turns as t')
      .select(['t.id', 't.session_id', 't.status', 't.stop_reason', 't.usage_json', 't.started_at', 't.ended_at'])
      .where('t.project_id', '=', projectId)
      .where('t.session_id', 'in', sessionIds)
      .where('t.id', '=', (eb) =>
        eb
          .selectFrom('turns as u')
          .select('u.id')
          .whereRef('u.project_id', '=', 't.project_id')
          .whereRef('u.session_id', '=', 't.session_id')
          .orderBy('u.started_at', 'desc')
          .orderBy('u.id', 'desc')
          .limit(1),
      )
      .execute();
    return new Map(
      rows.map((row) => [
        row.session_id,
        { id: row.id, status: row.status, stop_reason: row.stop_reason as StopReason | null, usage: fromJson<Usage>(row.usage_json), started_at: row.started_at, ended_at: row.ended_at },
      ]),
    );
  }

  /**
   * Records every turn still `running` (or just those in `ids`) as `interrupted`: at shutdown for
   * the turns this process abandons, at startup for those a crash left behind. Returns how many.
   * Without `ids` it touches every replica's turns, so on a shared PostgreSQL it is only right once
   * turns carry a lease (design.md §5); until then call it bare only on a database this process owns.
   *
   * What such a turn asked for goes with it: an interaction it recorded before its end was (a
   * process killed between the two) belongs to a turn that never paused, so an answer would
   * continue from no stored output and drop the call it approves. Answering it is refused instead.
   */
  async function markRunningAsInterrupted(ids?: readonly string[]): Promise<number> {
    if (ids !== undefined && ids.length === 0) return 0;
    return db.transaction().execute(async (trx) => {
      const at = nowIso();
      const running = trx.selectFrom('turns').select('id').where('status', '=', 'running');
      const cut = ids === undefined ? running : running.where('id', 'in', ids);
      await trx
        .updateTable('interactions')
        .set({ status: 'cancelled', resolution_json: toJson({ via: 'interrupted' }), updated_at: at })
        .where('status', 'in', ['pending', 'responded'])
        .where('turn_id', 'in', cut)
        .execute();
      await trx.deleteFrom('paused_states').where('turn_id', 'in', cut).execute();
      const result = await trx.updateTable('turns').set({ status: 'interrupted', stop_reason: 'interrupted', ended_at: at }).where('id', 'in', cut).executeTakeFirst();
      return Number(result.numUpdatedRows);
    });
  }

  /** Deletes a turn recorded as it began and refused before it started; one that has ended stays. */
  async function removeUnstarted(projectId: string, id: string): Promise<void> {
    await db.deleteFrom('turns').where('project_id', '=', projectId).where('id', '=', id).where('status', '=', 'running').execute();
  }

  return { create, finish, get, listForSession, listForSessionPage, latestOf, markRunningAsInterrupted, removeUnstarted };
}

export type TurnsRepo = ReturnType<typeof createTurnsRepo>;
