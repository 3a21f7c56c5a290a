import { sql, type Kysely, type Selectable } from 'kysely';
import type { InteractionKind } from '../contract/events.ts';
import type { InteractionQuery } from '../contract/interactions.ts';
import { fromJson, nowIso, toJson } from './columns.ts';
import { decodeCursor, pageSize, toPage, type Page, type PageRequest } from './cursor.ts';
import type { Database, InteractionStatus, InteractionsTable } from './schema.ts';

export type { InteractionStatus };

type JsonObject = Record<string, unknown>;

interface InteractionRequest {
  tool: string;
  args: unknown;
  tool_call_id: string;
}

export interface InteractionRecord {
  id: string;
  project_id: string;
  session_id: string;
  turn_id: string;
  kind: InteractionKind;
  status: InteractionStatus;
  tool_call_id: string;
  request: InteractionRequest;
  answer: JsonObject | null;
  resolution: JsonObject | null;
  created_at: string;
  updated_at: string;
}

export interface NewInteraction {
  id: string;
  project_id: string;
  session_id: string;
  turn_id: string;
  kind: InteractionKind;
  tool_call_id: string;
  request: InteractionRequest;
}

export interface Transition {
  from: readonly InteractionStatus[];
  to: InteractionStatus;
  answer?: JsonObject | null;
  resolution?: JsonObject | null;
}

/** What `query` can select on, and in which order: the API's query body without its paging fields. */
export type InteractionFilters = Pick<InteractionQuery, 'session_id' | 'turn_id' | 'kind' | 'status' | 'newest' | 'oldest' | 'order'>;

/** States a record can still leave; `resolved` and `cancelled` are final (design.md §4). */
export const OPEN_INTERACTION_STATUSES: readonly InteractionStatus[] = ['pending', 'responded'];

function toInteraction(row: Selectable<InteractionsTable>): InteractionRecord {
  return {
    id: row.id,
    project_id: row.project_id,
    session_id: row.session_id,
    turn_id: row.turn_id,
    kind: row.kind as InteractionKind,
    status: row.status,
    tool_call_id: row.tool_call_id,
    request: JSON.parse(row.request_json) as InteractionRequest,
    answer: fromJson<JsonObject>(row.answer_json),
    resolution: fromJson<JsonObject>(row.resolution_json),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function createInteractionsRepo(db: Kysely<Database>) {
  async function create(input: NewInteraction): Promise<InteractionRecord> {
    const at = nowIso();
    const row = {
      id: input.id,
      project_id: input.project_id,
      session_id: input.session_id,
      turn_id: input.turn_id,
      kind: input.kind,
      status: 'pending' as const,
      tool_call_id: input.tool_call_id,
      request_json: JSON.stringify(input.request),
      answer_json: null,
      resolution_json: null,
      created_at: at,
      updated_at: at,
    };
    await db.insertInto('interactions').values(row).execute();
    return toInteraction(row);
  }

  async function get(projectId: string, id: string): Promise<InteractionRecord | undefined> {
    const row = await db
      .selectFrom('interactions')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toInteraction(row);
  }

  /** The session's interactions on these tool calls, newest first. */
  async function ofToolCalls(projectId: string, sessionId: string, toolCallIds: readonly string[]): Promise<InteractionRecord[]> {
    if (toolCallIds.length === 0) return [];
    const rows = await db
      .selectFrom('interactions')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('session_id', '=', sessionId)
      .where('tool_call_id', 'in', toolCallIds)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    return rows.map(toInteraction);
  }

  /** Oldest first, the order the turn asked them in. */
  async function listPending(projectId: string, sessionId: string): Promise<InteractionRecord[]> {
    const rows = await db
      .selectFrom('interactions')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('session_id', '=', sessionId)
      .where('status', '=', 'pending')
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toInteraction);
  }

  /** How many interactions wait for an answer in each of these sessions (absent: none). */
  async function pendingCounts(projectId: string, sessionIds: readonly string[]): Promise<Map<string, number>> {
    if (sessionIds.length === 0) return new Map();
    const rows = await db
      .selectFrom('interactions')
      .select((eb) => ['session_id', eb.fn.countAll<number | string | bigint>().as('n')])
      .where('project_id', '=', projectId)
      .where('session_id', 'in', sessionIds)
      .where('status', '=', 'pending')
      .groupBy('session_id')
      .execute();
    // PostgreSQL returns count(*) as a bigint string.
    return new Map(rows.map((row) => [row.session_id, Number(row.n)]));
  }

  /** Interactions waiting for an answer in every project, and the sessions they are in: the operator's gauges. */
  async function waitingCounts(): Promise<{ interactions: number; sessions: number }> {
    const row = await db
      .selectFrom('interactions')
      .select((eb) => [
        eb.fn.countAll<number | string | bigint>().as('interactions'),
        eb.fn.count<number | string | bigint>(sql`project_id || ':' || session_id`).distinct().as('sessions'),
      ])
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow();
    return { interactions: Number(row.interactions), sessions: Number(row.sessions) };
  }

  /** Oldest first (the order the turns asked them in) unless `order` is descending; every filter given must match. */
  async function query(projectId: string, filters: InteractionFilters, page: PageRequest): Promise<Page<InteractionRecord>> {
    const limit = pageSize(page.limit);
    if (Array.isArray(filters.status) && filters.status.length === 0) return { items: [] };
    let q = db.selectFrom('interactions').selectAll().where('project_id', '=', projectId);
    if (filters.session_id !== undefined) q = q.where('session_id', '=', filters.session_id);
    if (filters.turn_id !== undefined) q = q.where('turn_id', '=', filters.turn_id);
    if (filters.kind !== undefined) q = q.where('kind', '=', filters.kind);
    if (filters.status !== undefined) q = q.where('status', 'in', typeof filters.status === 'string' ? [filters.status] : filters.status);
    if (filters.oldest !== undefined) q = q.where('created_at', '>=', filters.oldest);
    if (filters.newest !== undefined) q = q.where('created_at', '<=', filters.newest);
    const descending = filters.order === 'descending';
    const beyond = descending ? '<' : '>';
    if (page.cursor !== undefined) {
      const after = decodeCursor(page.cursor);
      q = q.where((eb) => eb.or([eb('created_at', beyond, after.at), eb.and([eb('created_at', '=', after.at), eb('id', beyond, after.id)])]));
    }
    const direction = descending ? 'desc' : 'asc';
    const rows = await q.orderBy('created_at', direction).orderBy('id', direction).limit(limit + 1).execute();
    return toPage(rows, limit, (row) => ({ at: row.created_at, id: row.id }), toInteraction);
  }

  /**
   * Records in `status` across every project, least recently changed first: for a startup sweep
   * that picks up what a stopped process left (e.g. `responded` records never continued).
   */
  async function listByStatus(status: InteractionStatus | readonly InteractionStatus[], limit: number): Promise<InteractionRecord[]> {
    const statuses = typeof status === 'string' ? [status] : status;
    if (statuses.length === 0) return [];
    const rows = await db
      .selectFrom('interactions')
      .selectAll()
      .where('status', 'in', statuses)
      .orderBy('updated_at')
      .orderBy('id')
      .limit(pageSize(limit))
      .execute();
    return rows.map(toInteraction);
  }

  /**
   * Moves a record from one of `from` to `to` in a single conditional UPDATE, so of two concurrent
   * callers exactly one sees the record come back; the other gets undefined, as does a record that
   * is missing, in another project, or in a state outside `from`. `answer`/`resolution` are
   * written only when given.
   */
  async function transition(projectId: string, id: string, change: Transition): Promise<InteractionRecord | undefined> {
    if (change.from.length === 0) return undefined;
    const row = await db
      .updateTable('interactions')
      .set({
        status: change.to,
        updated_at: nowIso(),
        ...(change.answer !== undefined && { answer_json: toJson(change.answer) }),
        ...(change.resolution !== undefined && { resolution_json: toJson(change.resolution) }),
      })
      .where('id', '=', id)
      .where('project_id', '=', projectId)
      .where('status', 'in', change.from)
      .returningAll()
      .executeTakeFirst();
    return row && toInteraction(row);
  }

  /**
   * Several transitions, all or none: when one finds its record no longer in a `from` state, the
   * ones made before it are undone. Returns the id of the one that failed, else undefined.
   */
  async function transitionAll(projectId: string, changes: ReadonlyArray<Transition & { id: string }>): Promise<string | undefined> {
    const refused = new Error('a transition found its record moved on');
    let failed: string | undefined;
    try {
      await db.transaction().execute(async (trx) => {
        const inTransaction = createInteractionsRepo(trx);
        for (const change of changes) {
          if (await inTransaction.transition(projectId, change.id, change)) continue;
          failed = change.id;
          throw refused;
        }
      });
    } catch (error) {
      if (error !== refused) throw error;
    }
    return failed;
  }

  /**
   * Cancels the session's `pending` interactions except `exceptIds`, when a new turn abandons them.
   * A `responded` record is left alone by default because an out-of-band continuation may be about
   * to consume it; a takeover that abandons that too passes `from: OPEN_INTERACTION_STATUSES`
   * (design.md §4). Returns how many were cancelled.
   */
  async function cancelPending(
    projectId: string,
    sessionId: string,
    exceptIds: readonly string[] = [],
    from: readonly InteractionStatus[] = ['pending'],
  ): Promise<number> {
    if (from.length === 0) return 0;
    let query = db
      .updateTable('interactions')
      .set({ status: 'cancelled', updated_at: nowIso() })
      .where('project_id', '=', projectId)
      .where('session_id', '=', sessionId)
      .where('status', 'in', from);
    if (exceptIds.length > 0) query = query.where('id', 'not in', exceptIds);
    const result = await query.executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  return { create, get, ofToolCalls, listPending, pendingCounts, waitingCounts, query, listByStatus, transition, transitionAll, cancelPending };
}

export type InteractionsRepo = ReturnType<typeof createInteractionsRepo>;
