import { sql, type Kysely, type Selectable } from 'kysely';
import type { Attempt, EvaluatorScore, MetricsRecord, ResultStatus, RunStatus } from '../contract/evaluations.ts';
import { dbTime, fromJson, nowIso, toJson, type Engine } from './columns.ts';
import { decodeCursor, pageSize, toPage, type Page, type PageRequest } from './cursor.ts';
import type { Database, EvaluationResultsTable, EvaluationRunsTable } from './schema.ts';

/** Evaluation runs and their per-case results. */

type JsonObject = Record<string, unknown>;

export interface RunRecord<Spec = JsonObject> {
  id: string;
  project_id: string;
  name: string | null;
  description: string | null;
  status: RunStatus;
  spec: Spec;
  tags: JsonObject | null;
  meta: JsonObject | null;
  flags: JsonObject | null;
  error: { type?: string; message: string } | null;
  metrics: MetricsRecord[] | null;
  cancel_requested: boolean;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  ended_at: string | null;
}

export interface ResultError {
  code?: number;
  type?: string;
  message: string;
}

export interface ResultRecord {
  id: string;
  run_id: string;
  testcase_id: string;
  repeat_idx: number;
  status: ResultStatus;
  not_before: string | null;
  attempts: Attempt[];
  output: { messages: unknown[]; stop_reason?: string } | null;
  error: ResultError | null;
  scores: EvaluatorScore[] | null;
  duration_ms: number | null;
  tokens: number | null;
  cost: number | null;
  trace_id: string | null;
  session_id: string | null;
  created_at: string;
  updated_at: string;
}

/** What one attempt changes on its result row. */
export interface ResultUpdate {
  status: ResultStatus;
  /** A retry: not to be claimed again before this many ms from now, by the database's clock. */
  retry_in_ms?: number;
  attempts: Attempt[];
  output?: ResultRecord['output'];
  error?: ResultError | null;
  scores?: EvaluatorScore[] | null;
  duration_ms?: number | null;
  tokens?: number | null;
  cost?: number | null;
  trace_id?: string | null;
  session_id?: string | null;
}

export interface ResultFilter {
  run_ids?: string[];
  ids?: string[];
  testcase_ids?: string[];
  repeat_idxs?: number[];
  statuses?: ResultStatus[];
}

export type Progress = Record<ResultStatus, number> & { total: number };

function toRun<Spec>(row: Selectable<EvaluationRunsTable>): RunRecord<Spec> {
  return {
    id: row.id,
    project_id: row.project_id,
    name: row.name,
    description: row.description,
    status: row.status as RunStatus,
    spec: fromJson<Spec>(row.spec_json)!,
    tags: fromJson<JsonObject>(row.tags_json),
    meta: fromJson<JsonObject>(row.meta_json),
    flags: fromJson<JsonObject>(row.flags_json),
    error: fromJson(row.error_json),
    metrics: fromJson(row.metrics_json),
    cancel_requested: Number(row.cancel_requested) === 1,
    created_at: row.created_at,
    updated_at: row.updated_at,
    started_at: row.started_at,
    ended_at: row.ended_at,
  };
}

function toResult(row: Selectable<EvaluationResultsTable>): ResultRecord {
  const num = (value: number | null) => (value === null ? null : Number(value));
  return {
    id: row.id,
    run_id: row.run_id,
    testcase_id: row.testcase_id,
    repeat_idx: Number(row.repeat_idx),
    status: row.status as ResultStatus,
    not_before: row.not_before,
    attempts: fromJson<Attempt[]>(row.attempts_json) ?? [],
    output: fromJson(row.output_json),
    error: fromJson(row.error_json),
    scores: fromJson(row.scores_json),
    duration_ms: num(row.duration_ms),
    tokens: num(row.tokens),
    cost: num(row.cost),
    trace_id: row.trace_id,
    session_id: row.session_id,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** Rows per insert when a run's cases are written: well under SQLite's bound-parameter limit. */
const INSERT_CHUNK = 200;

/** What a claim reads of a case before taking it. */
type ClaimRow = { id: string; status: string; attempts_json: string; updated_at: string };

/**
 * A case's attempts with the one its process was in when it died appended, as `interrupted`: from
 * when that process claimed it (the row's last write) to now. It says what happened, and does not
 * count against the case's retries.
 */
function withInterrupted(row: { attempts_json: string; updated_at: string }): string {
  const attempts = fromJson<Attempt[]>(row.attempts_json)!;
  const cutOff: Attempt = {
    attempt: attempts.length + 1,
    status: 'interrupted',
    started_at: row.updated_at,
    duration_ms: Math.max(0, Date.now() - Date.parse(row.updated_at)),
    error: { message: 'the process running this case stopped before it ended (a crash, or a replica lost); the case ran again' },
  };
  return JSON.stringify([...attempts, cutOff]);
}

export function createEvaluationsRepo(db: Kysely<Database>, engine: Engine) {
  /** Writes the run and one pending result per case, together: a run never exists without its cases. */
  async function createRun(
    run: { id: string; project_id: string; name?: string | undefined; description?: string | undefined; spec: object; tags?: JsonObject | undefined; meta?: JsonObject | undefined; flags?: JsonObject | undefined },
    cases: { id: string; testcase_id: string; repeat_idx: number }[],
  ): Promise<void> {
    const now = nowIso();
    await db.transaction().execute(async (trx) => {
      await trx
        .insertInto('evaluation_runs')
        .values({
          id: run.id,
          project_id: run.project_id,
          name: run.name ?? null,
          description: run.description ?? null,
          // Creating a run starts it (spec §4.5), so it is running from the start.
          status: 'running',
          spec_json: JSON.stringify(run.spec),
          tags_json: toJson(run.tags),
          meta_json: toJson(run.meta),
          flags_json: toJson(run.flags),
          error_json: null,
          metrics_json: null,
          cancel_requested: 0,
          created_at: now,
          updated_at: now,
          started_at: now,
          ended_at: null,
        })
        .execute();
      for (let i = 0; i < cases.length; i += INSERT_CHUNK) {
        await trx
          .insertInto('evaluation_results')
          .values(
            cases.slice(i, i + INSERT_CHUNK).map((c) => ({
              id: c.id,
              project_id: run.project_id,
              run_id: run.id,
              testcase_id: c.testcase_id,
              repeat_idx: c.repeat_idx,
              status: 'pending',
              not_before: null,
              claimed_by: null,
              claim_expires_at: null,
              attempts_json: '[]',
              output_json: null,
              error_json: null,
              scores_json: null,
              duration_ms: null,
              tokens: null,
              cost: null,
              trace_id: null,
              session_id: null,
              created_at: now,
              updated_at: now,
            })),
          )
          .execute();
      }
    });
  }

  async function getRun<Spec>(projectId: string, id: string): Promise<RunRecord<Spec> | undefined> {
    const row = await db.selectFrom('evaluation_runs').selectAll().where('project_id', '=', projectId).where('id', '=', id).executeTakeFirst();
    return row && toRun<Spec>(row);
  }

  /** Newest first. */
  async function listRuns<Spec>(projectId: string, page: PageRequest): Promise<Page<RunRecord<Spec>>> {
    const limit = pageSize(page.limit);
    let query = db.selectFrom('evaluation_runs').selectAll().where('project_id', '=', projectId);
    if (page.cursor) {
      const after = decodeCursor(page.cursor);
      query = query.where((eb) => eb.or([eb('created_at', '<', after.at), eb.and([eb('created_at', '=', after.at), eb('id', '<', after.id)])]));
    }
    const rows = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
    return toPage(rows, limit, (row) => ({ at: row.created_at, id: row.id }), (row) => toRun<Spec>(row));
  }

  /** Every run that has not ended, in every project: what a starting server picks up. */
  async function listUnfinished<Spec>(): Promise<RunRecord<Spec>[]> {
    const rows = await db.selectFrom('evaluation_runs').selectAll().where('status', 'in', ['pending', 'running']).orderBy('created_at').execute();
    return rows.map((row) => toRun<Spec>(row));
  }

  /** Changes a run; with `from`, only while the run is in that status (so one replica ends it). */
  async function updateRun(
    id: string,
    change: { status?: RunStatus; started_at?: string; ended_at?: string | null; error?: RunRecord['error']; metrics?: MetricsRecord[] | null; cancel_requested?: boolean },
    from?: RunStatus,
  ): Promise<boolean> {
    let query = db
      .updateTable('evaluation_runs')
      .set({
        updated_at: nowIso(),
        ...(change.status ? { status: change.status } : {}),
        ...(change.started_at ? { started_at: change.started_at } : {}),
        ...(change.ended_at !== undefined ? { ended_at: change.ended_at } : {}),
        ...(change.error !== undefined ? { error_json: toJson(change.error) } : {}),
        ...(change.metrics !== undefined ? { metrics_json: toJson(change.metrics) } : {}),
        ...(change.cancel_requested !== undefined ? { cancel_requested: change.cancel_requested ? 1 : 0 } : {}),
      })
      .where('id', '=', id);
    if (from) query = query.where('status', '=', from);
    const result = await query.executeTakeFirst();
    const updated = Number(result.numUpdatedRows) > 0;
    // An ended run's slots hold nothing; a rerun's first claim makes them again.
    if (updated && change.ended_at) await db.deleteFrom('evaluation_slots').where('run_id', '=', id).execute();
    return updated;
  }

  async function progress(runId: string): Promise<Progress> {
    const rows = await db.selectFrom('evaluation_results').select(['status', (eb) => eb.fn.countAll<number>().as('n')]).where('run_id', '=', runId).groupBy('status').execute();
    const counts: Progress = { total: 0, pending: 0, running: 0, success: 0, failure: 0, cancelled: 0 };
    for (const row of rows) {
      counts[row.status as ResultStatus] = Number(row.n);
      counts.total += Number(row.n);
    }
    return counts;
  }

  /**
   * Takes up to `limit` cases that are due, in id order (ids number a run's cases), for this
   * holder, keeping the run's cases in flight — across every replica — at most `cap`. Due means
   * pending and past its retry time, or running under a claim that lapsed (its replica died):
   * such a case gets the attempt that was cut off recorded as `interrupted`. Claims expire by the
   * database's clock, so replicas whose clocks disagree never take each other's live cases.
   */
  async function claim(runId: string, holder: string, limit: number, cap: number, ttlMs: number): Promise<ResultRecord[]> {
    return db.transaction().execute(async (trx) => {
      const now = dbTime(engine);
      const cases = () => trx.selectFrom('evaluation_results').select(['id', 'status', 'attempts_json', 'updated_at']).where('run_id', '=', runId).orderBy('id');
      const pendingDue = () => cases().where('status', '=', 'pending').where((eb) => eb.or([eb('not_before', 'is', null), eb('not_before', '<=', now)]));
      const lapsedRunning = () => cases().where('status', '=', 'running').where('claim_expires_at', '<=', now);
      let chosen: ClaimRow[];
      /** Slots the chosen pending cases take, in the same order (PostgreSQL). */
      let slots: number[] = [];
      if (engine === 'postgres') {
        // A lapsed case keeps the slot it had; a pending one needs a free slot. Rows another
        // claimer has locked are skipped, not waited for.
        const lapsed = await lapsedRunning().limit(limit).forUpdate().skipLocked().execute();
        const free = limit > lapsed.length ? await freeSlots(trx, runId, cap, limit - lapsed.length) : [];
        const pending = free.length > 0 ? await pendingDue().limit(free.length).forUpdate().skipLocked().execute() : [];
        slots = free.slice(0, pending.length);
        chosen = [...lapsed, ...pending];
      } else {
        // SQLite has one writer: counting the run's live claims and taking cases cannot interleave.
        const live = await trx
          .selectFrom('evaluation_results')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('run_id', '=', runId)
          .where('status', '=', 'running')
          .where('claim_expires_at', '>', now)
          .executeTakeFirst();
        const take = Math.min(limit, cap - Number(live?.n ?? 0));
        if (take <= 0) return [];
        // Two index range scans in id order rather than one query with an OR, which read and
        // sorted every case of the run on each claim.
        const both = [...(await pendingDue().limit(take).execute()), ...(await lapsedRunning().limit(take).execute())];
        chosen = both.sort((a, b) => (a.id < b.id ? -1 : 1)).slice(0, take);
      }
      if (chosen.length === 0) return [];
      for (const row of chosen.filter((r) => r.status === 'running')) {
        await trx.updateTable('evaluation_results').set({ attempts_json: withInterrupted(row) }).where('id', '=', row.id).execute();
      }
      const rows = await trx
        .updateTable('evaluation_results')
        .set({ status: 'running', claimed_by: holder, claim_expires_at: dbTime(engine, ttlMs), updated_at: nowIso() })
        .where('id', 'in', chosen.map((row) => row.id))
        .returningAll()
        .execute();
      if (slots.length > 0) {
        const taken = chosen.filter((row) => row.status === 'pending');
        const pairs = sql.join(slots.map((slot, i) => sql`(${slot}::int, ${taken[i]!.id}::text)`));
        await sql`update evaluation_slots as s set result_id = v.result_id from (values ${pairs}) as v(slot, result_id) where s.run_id = ${runId} and s.slot = v.slot`.execute(trx);
      }
      rows.sort((a, b) => (a.id < b.id ? -1 : 1));
      return rows.map(toResult);
    });
  }

  /**
   * Up to `n` of the run's free slots, locked for this claim and skipping those another claim has
   * locked. A run's slots are made by its first claim (any replica's; making them twice is
   * harmless), so a run needs nothing of them until it is claimed from.
   */
  async function freeSlots(trx: Kysely<Database>, runId: string, cap: number, n: number): Promise<number[]> {
    const query = () =>
      trx
        .selectFrom('evaluation_slots as s')
        .leftJoin('evaluation_results as r', 'r.id', 's.result_id')
        .select('s.slot')
        .where('s.run_id', '=', runId)
        .where((eb) => eb.or([eb('s.result_id', 'is', null), eb('r.status', '!=', 'running')]))
        .orderBy('s.slot')
        .limit(n)
        .forUpdate('s')
        .skipLocked()
        .execute();
    const free = await query();
    if (free.length > 0) return free.map((row) => row.slot);
    const made = await trx.selectFrom('evaluation_slots').select((eb) => eb.fn.countAll<number>().as('n')).where('run_id', '=', runId).executeTakeFirst();
    if (Number(made?.n ?? 0) >= cap) return [];
    await trx
      .insertInto('evaluation_slots')
      .values(Array.from({ length: cap }, (_, slot) => ({ run_id: runId, slot, result_id: null })))
      .onConflict((oc) => oc.columns(['run_id', 'slot']).doNothing())
      .execute();
    return (await query()).map((row) => row.slot);
  }

  /** Keeps this holder's claims alive; returns how many it still holds. */
  async function renewClaims(holder: string, ids: readonly string[], ttlMs: number): Promise<number> {
    if (ids.length === 0) return 0;
    const result = await db
      .updateTable('evaluation_results')
      .set({ claim_expires_at: dbTime(engine, ttlMs) })
      .where('id', 'in', ids)
      .where('claimed_by', '=', holder)
      .where('status', '=', 'running')
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /**
   * A run's cases left running by a process that is gone (the one server of a SQLite deployment,
   * at its restart): each gets its cut-off attempt recorded as `interrupted`, and runs again.
   */
  async function requeueInterrupted(runId: string): Promise<number> {
    return db.transaction().execute(async (trx) => {
      const rows = await trx.selectFrom('evaluation_results').select(['id', 'attempts_json', 'updated_at']).where('run_id', '=', runId).where('status', '=', 'running').execute();
      for (const row of rows) {
        await trx
          .updateTable('evaluation_results')
          .set({ status: 'pending', claimed_by: null, claim_expires_at: null, not_before: null, updated_at: nowIso(), attempts_json: withInterrupted(row) })
          .where('id', '=', row.id)
          .execute();
      }
      return rows.length;
    });
  }

  /** When the earliest case waiting for a retry becomes due, if any is waiting. */
  async function nextDue(runId: string): Promise<string | undefined> {
    const row = await db
      .selectFrom('evaluation_results')
      .select((eb) => eb.fn.min('not_before').as('at'))
      .where('run_id', '=', runId)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    return row?.at ?? undefined;
  }

  /**
   * Writes an attempt's outcome, only while `holder` still holds the case: a replica that was
   * taken for dead and comes back never overwrites its successor. False when it no longer does.
   */
  async function updateResult(id: string, holder: string, update: ResultUpdate): Promise<boolean> {
    const result = await db
      .updateTable('evaluation_results')
      .set({
        status: update.status,
        updated_at: nowIso(),
        attempts_json: JSON.stringify(update.attempts),
        claimed_by: null,
        claim_expires_at: null,
        ...(update.retry_in_ms !== undefined ? { not_before: dbTime(engine, update.retry_in_ms) } : {}),
        ...(update.output !== undefined ? { output_json: toJson(update.output) } : {}),
        ...(update.error !== undefined ? { error_json: toJson(update.error) } : {}),
        ...(update.scores !== undefined ? { scores_json: toJson(update.scores) } : {}),
        ...(update.duration_ms !== undefined ? { duration_ms: update.duration_ms } : {}),
        ...(update.tokens !== undefined ? { tokens: update.tokens } : {}),
        ...(update.cost !== undefined ? { cost: update.cost } : {}),
        ...(update.trace_id !== undefined ? { trace_id: update.trace_id } : {}),
        ...(update.session_id !== undefined ? { session_id: update.session_id } : {}),
      })
      .where('id', '=', id)
      .where('claimed_by', '=', holder)
      .where('status', '=', 'running')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Moves a run's cases from one status to another (a restart's `running → pending`, a stop's `pending → cancelled`, a rerun's `failure → pending`). */
  async function moveResults(runId: string, from: ResultStatus, to: ResultStatus): Promise<number> {
    const result = await db
      .updateTable('evaluation_results')
      .set({ status: to, claimed_by: null, claim_expires_at: null, not_before: null, updated_at: nowIso() })
      .where('run_id', '=', runId)
      .where('status', '=', from)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  async function queryResults(projectId: string, filter: ResultFilter, page: PageRequest): Promise<Page<ResultRecord>> {
    const limit = pageSize(page.limit);
    let query = db.selectFrom('evaluation_results').selectAll().where('project_id', '=', projectId);
    if (filter.run_ids) query = query.where('run_id', 'in', filter.run_ids);
    if (filter.ids) query = query.where('id', 'in', filter.ids);
    if (filter.testcase_ids) query = query.where('testcase_id', 'in', filter.testcase_ids);
    if (filter.repeat_idxs) query = query.where('repeat_idx', 'in', filter.repeat_idxs);
    if (filter.statuses) query = query.where('status', 'in', filter.statuses);
    if (page.cursor) {
      const after = decodeCursor(page.cursor);
      query = query.where((eb) => eb.or([eb('created_at', '>', after.at), eb.and([eb('created_at', '=', after.at), eb('id', '>', after.id)])]));
    }
    const rows = await query.orderBy('created_at').orderBy('id').limit(limit + 1).execute();
    return toPage(rows, limit, (row) => ({ at: row.created_at, id: row.id }), toResult);
  }

  /** Every result of a run, in case order, for its metrics. */
  async function resultsOf(runId: string): Promise<ResultRecord[]> {
    const rows = await db.selectFrom('evaluation_results').selectAll().where('run_id', '=', runId).orderBy('id').execute();
    return rows.map(toResult);
  }

  return { createRun, getRun, listRuns, listUnfinished, updateRun, progress, claim, renewClaims, requeueInterrupted, nextDue, updateResult, moveResults, queryResults, resultsOf };
}

export type EvaluationsRepo = ReturnType<typeof createEvaluationsRepo>;
