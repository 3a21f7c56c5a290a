import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Attempt, EvaluatorScore, EvaluatorSpec, RunStatus } from '../contract/evaluations.ts';
import { EVALUATION_SESSION_PREFIX } from '../contract/sessions.ts';
import type { EffectiveTemplate } from '../agent/template.ts';
import { retryAfterMs } from '../client/errors.ts';
import { AppError, isAppError } from '../errors.ts';
import type { Inbound } from '../sessions/inbound.ts';
import type { LiveTurn } from '../sessions/live-turn.ts';
import type { TurnService } from '../sessions/turn-service.ts';
import type { Store } from '../store/db.ts';
import { OPEN_INTERACTION_STATUSES } from '../store/interactions.ts';
import { outageLog, type OutageLog } from '../store/outage-log.ts';
import { databaseUnavailable } from '../store/unavailable.ts';
import type { ServiceMetrics } from '../telemetry/metrics.ts';
import type { ResultError, ResultRecord, ResultUpdate, RunRecord } from '../store/evaluations.ts';
import { evaluate, type Complete } from './evaluators.ts';
import { runMetrics } from './metrics.ts';

/** What a run executes, fixed when it is created (runs.ts) and stored with it. */
export interface EvaluationSpec {
  testset: { id: string; slug: string; revision_id: string; version: number };
  application: { revision_id: string; workflow_id: string; workflow_slug: string; version: number; step_key: string };
  testset_steps: Record<string, string>;
  application_steps: Record<string, string>;
  evaluator_steps?: Record<string, string>;
  /** With their final names. */
  evaluators: { name: string; spec: EvaluatorSpec }[];
  repeats: number;
  concurrency: { batch_size: number; max_retries: number; retry_delay: number };
}

export type EvaluationRun = RunRecord<EvaluationSpec>;

/** What the engine needs to run a run's cases: prepared once per run (runs.ts). */
export interface PreparedRun {
  template: EffectiveTemplate;
  /** The conversation of each test case, already filtered to the agent's inputs and checked. */
  conversations: Map<string, Inbound | AppError>;
  testcases: Map<string, Record<string, unknown>>;
}

export interface EngineDeps {
  store: Store;
  turns: TurnService;
  /** How long a case's claim outlives its last renewal: a dead replica's cases are taken over after it. */
  claimTtlMs: number;
  /** How often an idle driver looks again (other replicas' cases, lapsed claims, a stop request). */
  pollMs: number;
  prepare(run: EvaluationRun): Promise<PreparedRun>;
  complete?: Complete | undefined;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
  /** The operator's metrics, when `/metrics` is on. */
  metrics?: ServiceMetrics | undefined;
}

/**
 * Errors that would fail again the same way: retrying them only burns the provider's quota. A
 * key the provider refused, or none at all, is one of them (`upstream-auth`; its 424 is shared
 * with an MCP server out of reach, which may come back).
 */
const PERMANENT = new Set([400, 401, 403, 404, 413, 422]);
const permanent = (failure: AppError) => PERMANENT.has(failure.status) || failure.type === 'upstream-auth' || failure.type === 'upstream-rejected';

/**
 * The least time between the starts of two cases of one claim. Started together, a batch's model
 * requests leave as one burst, their answers come back together, and the batch's work bunches up
 * behind each answer round after round (SQLite's group commit and the turn threads' messages
 * gather per pass of the event loop, and keep them in step): a run at a fixed latency took 1.27 ×
 * its ideal at batch_size 100, against 1.11–1.13 with its cases started a millisecond apart
 * (BENCHMARKS.md, "A run's cases started apart"). A burst is also what a provider's rate limits
 * punish. It costs a run at most batch_size milliseconds, once.
 */
const START_SPACING_MS = 1;

/**
 * Waits until START_SPACING_MS have passed since `last`. A timer alone is not enough: it counts
 * from the event loop's clock, read when the loop last woke, which lags the real one by however
 * long the loop has been busy since, so a one-millisecond timer can end well within the millisecond.
 */
async function spacedFrom(last: number): Promise<void> {
  while (performance.now() - last < START_SPACING_MS) await sleep(START_SPACING_MS);
}

/** Why an in-flight case stopped without an outcome of its own. */
const STOPPED = new Error('the evaluation run was stopped');
const DRAINING = new Error('the server is shutting down; the case will run again after the restart');

const toResultError = (error: AppError): ResultError => ({ code: error.status, type: error.type, message: error.message });

/** How long the provider asked to wait (the `retry-after` a 429 passes on), read as the client reads it. */
const waitAsked = (error: AppError): number => retryAfterMs(error.headers?.['retry-after'] ?? null) ?? 0;

/**
 * Runs evaluation runs: each run's cases go through the same turn engine as invoke, at most
 * `batch_size` of them in flight, each in a fresh session. A case's row is claimed before it runs
 * and written when it ends, so progress is what the rows say and a restart resumes from them.
 */
export class EvaluationEngine {
  private readonly deps: EngineDeps;
  private readonly drivers = new Map<string, RunDriver>();
  private readonly holder = randomUUID();
  private draining = false;

  constructor(deps: EngineDeps) {
    this.deps = deps;
  }

  /** Evaluation cases this process runs now, across its runs. */
  inFlight(): number {
    let count = 0;
    for (const driver of this.drivers.values()) count += driver.inFlight;
    return count;
  }

  /** Starts driving a run in this process (a no-op when it already is). */
  start(run: EvaluationRun): void {
    if (this.draining || this.drivers.has(run.id)) return;
    const driver = new RunDriver(run, this.deps, this.holder);
    this.drivers.set(run.id, driver);
    void driver
      .drive()
      .catch((error: unknown) => this.deps.log.error({ err: error, run_id: run.id }, 'an evaluation run failed unexpectedly'))
      .finally(() => this.drivers.delete(run.id));
  }

  /** Stops a run: in-flight cases are cancelled, the rest never start, the run ends `cancelled`. */
  async stop(run: EvaluationRun): Promise<void> {
    await this.deps.store.evaluations.updateRun(run.id, { cancel_requested: true });
    const driver = this.drivers.get(run.id);
    if (driver) {
      driver.abort(STOPPED);
      await driver.done;
    } else {
      await finishCancelled(this.deps.store, run.id);
    }
  }

  /**
   * At start: the runs a previous process left unfinished carry on. On SQLite this process is the
   * only one, so cases left running were cut off and run again at once; on PostgreSQL they may be
   * another replica's, and are taken over only when their claims lapse.
   */
  async resume(): Promise<number> {
    const { store } = this.deps;
    const runs = await store.evaluations.listUnfinished<EvaluationSpec>();
    for (const run of runs) {
      if (store.engine === 'sqlite') await store.evaluations.requeueInterrupted(run.id);
      if (run.cancel_requested) await finishCancelled(store, run.id);
      else this.start(run);
    }
    return runs.length;
  }

  /**
   * Replicas share runs: every `pollMs` this one picks up the unfinished runs it does not drive
   * yet, wherever they were created. Returns the function that stops watching.
   */
  watch(): () => void {
    const failures = outageLog(this.deps.log, 'look for evaluation runs');
    const timer = setInterval(() => {
      void this.deps.store.evaluations
        .listUnfinished<EvaluationSpec>()
        .then((runs) => {
          failures.succeeded();
          for (const run of runs) if (!run.cancel_requested) this.start(run);
        })
        .catch((error: unknown) => failures.failed(error));
    }, this.deps.pollMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /**
   * For a shutdown: no new case starts; the cases in flight end when the turn service interrupts
   * their turns, and go back to `pending` for the next start. Resolves when every driver is done.
   */
  async drain(): Promise<void> {
    this.draining = true;
    for (const driver of this.drivers.values()) driver.abort(DRAINING);
    await Promise.all([...this.drivers.values()].map((d) => d.done));
  }
}

/** Resolves after `ms`, when the run is stopped, or when the function handed to `onWake` is called. */
function pause(ms: number, signal: AbortSignal, onWake: (wake: () => void) => void): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
    onWake(done);
  });
}

async function finishCancelled(store: Store, runId: string): Promise<void> {
  await store.evaluations.moveResults(runId, 'pending', 'cancelled');
  await store.evaluations.updateRun(runId, { status: 'cancelled', ended_at: new Date().toISOString() }, 'running');
  await store.evaluations.updateRun(runId, { status: 'cancelled', ended_at: new Date().toISOString() }, 'pending');
}

/** One run, driven to its end in this process. */
class RunDriver {
  private readonly run: EvaluationRun;
  private readonly deps: EngineDeps;
  private readonly holder: string;
  private readonly controller = new AbortController();
  private readonly turns = new Set<LiveTurn>();
  /** When this drive of the run began: retries count failures since then (a rerun starts afresh). */
  private readonly startedAt: string;
  private readonly renewFailures: OutageLog;
  readonly done: Promise<void>;
  private resolveDone!: () => void;

  constructor(run: EvaluationRun, deps: EngineDeps, holder: string) {
    this.run = run;
    this.deps = deps;
    this.holder = holder;
    this.renewFailures = outageLog(deps.log, 'renew evaluation claims');
    this.startedAt = run.started_at ?? new Date().toISOString();
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  /** Cases of this run running in this process now. */
  get inFlight(): number {
    return this.turns.size;
  }

  abort(reason: Error): void {
    if (this.controller.signal.aborted) return;
    // Each case's turn stops with it, one still being set up too (its plan's signal).
    this.controller.abort(reason);
  }

  async drive(): Promise<void> {
    const { store } = this.deps;
    const runId = this.run.id;
    try {
      await this.whileUnavailable(() => store.evaluations.updateRun(runId, { status: 'running', started_at: this.startedAt }));
      let prepared: PreparedRun;
      try {
        prepared = await this.whileUnavailable(() => this.deps.prepare(this.run));
      } catch (error) {
        const failure = isAppError(error) ? error : new AppError('internal', 'the run could not be prepared', { cause: error });
        await store.evaluations.moveResults(runId, 'pending', 'cancelled');
        await store.evaluations.updateRun(runId, { status: 'failure', ended_at: new Date().toISOString(), error: { type: failure.type, message: failure.message } });
        return;
      }
      await this.loop(prepared);
      await this.whileUnavailable(() => this.finish());
    } finally {
      this.resolveDone();
    }
  }

  /**
   * A statement the run cannot go on without, tried again every `pollMs` while the database is
   * unavailable (down, restarting, its disk full), so the run carries on once it is back rather
   * than stay `running` with no one driving it; SQLite has no other replica to pick it up. Gives
   * up when the run is stopped.
   */
  private async whileUnavailable<T>(statement: () => Promise<T>): Promise<T> {
    let waited = false;
    for (;;) {
      try {
        return await statement();
      } catch (error) {
        const down = databaseUnavailable(error);
        if (!down || this.controller.signal.aborted) throw error;
        if (!waited) this.deps.log.warn({ run_id: this.run.id, error: { type: down.type, message: down.message } }, 'an evaluation run waits for the database');
        waited = true;
        await pause(this.deps.pollMs, this.controller.signal, () => {});
      }
    }
  }

  /**
   * Keeps up to `batch_size` cases in flight — counting every replica's — until no case of the
   * run is left pending or running anywhere, or the run is stopped. Claims of the cases in flight
   * are renewed while they run; a stop requested through another replica is seen at a renewal.
   */
  private async loop(prepared: PreparedRun): Promise<void> {
    const { store, claimTtlMs, pollMs } = this.deps;
    const { batch_size } = this.run.spec.concurrency;
    const inFlight = new Map<string, Promise<void>>();
    const signal = this.controller.signal;
    const renewal = setInterval(() => void this.renew([...inFlight.keys()]), Math.max(50, claimTtlMs / 3));
    renewal.unref();
    // Whether a case ended since the last claim, and the wait to cut short when one does.
    let ended = false;
    let wake: (() => void) | undefined;
    try {
      while (!signal.aborted) {
        ended = false;
        const room = batch_size - inFlight.size;
        const claimed = room > 0 ? await this.whileUnavailable(() => store.evaluations.claim(this.run.id, this.holder, room, batch_size, claimTtlMs)) : [];
        let lastStart = -Infinity;
        for (const result of claimed) {
          await spacedFrom(lastStart);
          lastStart = performance.now();
          // A case whose outcome could not be written (the database went away) keeps its claim
          // until it lapses; then it is claimed again, here or elsewhere, and runs once more.
          const run = this.runCase(result, prepared)
            .catch((error: unknown) => this.deps.log.warn({ err: error, run_id: this.run.id, result_id: result.id }, 'could not record an evaluation case; it runs again once its claim lapses'))
            .finally(() => {
              inFlight.delete(result.id);
              ended = true;
              wake?.();
            });
          inFlight.set(result.id, run);
        }
        if (claimed.length > 0 && inFlight.size < batch_size) continue;
        if (claimed.length === 0 && inFlight.size === 0) {
          const progress = await this.whileUnavailable(() => store.evaluations.progress(this.run.id));
          if (progress.pending === 0 && progress.running === 0) break;
        }
        // Wait for a case here to end, a retry to come due, or the next look around.
        const due = claimed.length === 0 ? await this.whileUnavailable(() => store.evaluations.nextDue(this.run.id)) : undefined;
        const waitMs = due === undefined ? pollMs : Math.min(pollMs, Math.max(0, Date.parse(due) - Date.now()));
        if (!ended) await pause(waitMs, signal, (resolve) => (wake = resolve));
        wake = undefined;
      }
    } finally {
      clearInterval(renewal);
      // Also when the loop failed: a case still running must not outlive its driver.
      await Promise.allSettled(inFlight.values());
    }
  }

  private async renew(ids: string[]): Promise<void> {
    const { store, claimTtlMs } = this.deps;
    try {
      await store.evaluations.renewClaims(this.holder, ids, claimTtlMs);
      const run = await store.evaluations.getRun(this.run.project_id, this.run.id);
      this.renewFailures.succeeded();
      if (run?.cancel_requested) this.abort(STOPPED);
    } catch (error) {
      this.renewFailures.failed(error, { run_id: this.run.id });
    }
  }

  private async finish(): Promise<void> {
    const { store } = this.deps;
    const runId = this.run.id;
    const reason = this.controller.signal.reason;
    if (reason === DRAINING) return;
    if (reason === STOPPED) {
      await finishCancelled(store, runId);
      return;
    }
    const progress = await store.evaluations.progress(runId);
    const status: RunStatus = progress.failure > 0 || progress.cancelled > 0 ? 'errors' : 'success';
    const metrics = runMetrics({ ...this.run, status }, await store.evaluations.resultsOf(runId), false);
    // Every replica that drove the run gets here; the first to write ends it.
    await store.evaluations.updateRun(runId, { status, ended_at: new Date().toISOString(), metrics }, 'running');
  }

  /** Writes a case's outcome while this replica still holds it; a lost claim means another took over. */
  private async write(resultId: string, update: ResultUpdate): Promise<void> {
    if (!(await this.deps.store.evaluations.updateResult(resultId, this.holder, update))) {
      this.deps.log.warn({ run_id: this.run.id, result_id: resultId }, 'an evaluation case was taken over by another replica before it ended here; its outcome is dropped');
    }
  }

  /** One attempt of one case, and what follows from it: done, retried later, or failed for good. */
  private async runCase(result: ResultRecord, prepared: PreparedRun): Promise<void> {
    const { spec } = this.run;
    const number = result.attempts.length + 1;
    const startedAt = new Date().toISOString();
    const started = performance.now();
    // Unique per try, so a case taken over from a dead replica never meets that replica's session,
    // and told to nobody before the case ends: the turn runs in a private session (no lease).
    const sessionId = `${EVALUATION_SESSION_PREFIX}${result.id}:${number}:${randomUUID().slice(0, 8)}`;
    let turn: LiveTurn | undefined;
    let error: AppError | undefined;
    let folded: Awaited<LiveTurn['done']> | undefined;
    try {
      const conversation = prepared.conversations.get(result.testcase_id);
      if (conversation === undefined) throw new AppError('not-found', `test case ${result.testcase_id} is not in the run's test set revision`);
      if (conversation instanceof AppError) throw conversation;
      turn = await this.deps.turns.run({
        projectId: this.run.project_id,
        sessionId,
        template: prepared.template,
        messages: conversation.messages,
        ...(conversation.attachments.length ? { attachments: conversation.attachments } : {}),
        secrets: {},
        credentials: undefined,
        traceparent: undefined,
        record: { evaluation: { run_id: this.run.id, result_id: result.id, testcase_id: result.testcase_id, repeat_idx: result.repeat_idx, attempt: number } },
        force: false,
        streaming: false,
        privateSession: true,
        signal: this.controller.signal,
      });
      this.turns.add(turn);
      folded = await turn.done;
      if (turn.failure) error = turn.failure;
      else if (folded.stop_reason === 'paused') {
        // Nobody answers a case's pause: left open, it waited for ever, among the project's
        // interactions and in agentd_pending_interactions, and an answer would run the case's tool.
        await this.deps.store.interactions.cancelPending(this.run.project_id, sessionId, [], OPEN_INTERACTION_STATUSES);
        await this.deps.store.pausedStates.removeSession(this.run.project_id, sessionId);
        error = new AppError('invalid-request', 'the turn paused for a human decision; evaluation runs are unattended, so use permissions that do not ask (runner.permissions.default "allow" or "deny")');
      }
    } catch (caught) {
      const down = isAppError(caught) ? undefined : databaseUnavailable(caught);
      error = isAppError(caught) ? caught : (down ?? new AppError('internal', 'the case failed unexpectedly', { cause: caught }));
      if (!isAppError(caught) && !down) this.deps.log.error({ err: caught, run_id: this.run.id, result_id: result.id }, 'evaluation case failed');
    } finally {
      if (turn) this.turns.delete(turn);
    }

    const duration = performance.now() - started;
    const reason = this.controller.signal.reason;
    const stopped = this.controller.signal.aborted && error !== undefined;
    const attempt: Attempt = {
      attempt: number,
      status: error === undefined ? 'success' : stopped ? 'cancelled' : 'failure',
      started_at: startedAt,
      duration_ms: duration,
      ...(turn ? { trace_id: turn.traceId } : {}),
      ...(error ? { error: stopped ? { message: (reason as Error).message } : toResultError(error) } : {}),
    };
    const attempts = [...result.attempts, attempt];
    const ids = { trace_id: turn?.traceId ?? null, session_id: turn ? sessionId : null };

    const { metrics } = this.deps;
    if (error === undefined && folded) {
      metrics?.caseAttempt('success');
      const testcase = prepared.testcases.get(result.testcase_id) ?? {};
      const scores: EvaluatorScore[] = [];
      for (const { name, spec: evaluator } of spec.evaluators) scores.push(await evaluate(evaluator, name, { messages: folded.messages, testcase, trace: turn && { traceId: turn.traceId, spanId: turn.spanId } }, this.deps.complete));
      await this.write(result.id, {
        status: 'success',
        attempts,
        output: { messages: folded.messages, ...(folded.stop_reason ? { stop_reason: folded.stop_reason } : {}) },
        error: null,
        scores: scores.length ? scores : null,
        duration_ms: duration,
        tokens: folded.usage?.total ?? null,
        cost: folded.usage?.cost ?? null,
        ...ids,
      });
      return;
    }
    if (stopped) {
      metrics?.caseAttempt('cancelled');
      // Stopped: cancelled for good; drained: runs again after the restart.
      await this.write(result.id, { status: reason === DRAINING ? 'pending' : 'cancelled', attempts, ...ids });
      return;
    }
    const failure = error!;
    const failures = attempts.filter((a) => a.status === 'failure' && a.started_at >= this.startedAt).length;
    if (failures <= spec.concurrency.max_retries && !permanent(failure)) {
      metrics?.caseAttempt('retry');
      const delay = Math.max(spec.concurrency.retry_delay * 1000, waitAsked(failure));
      await this.write(result.id, { status: 'pending', retry_in_ms: delay, attempts, error: toResultError(failure), ...ids });
      return;
    }
    metrics?.caseAttempt('failure');
    await this.write(result.id, { status: 'failure', attempts, error: toResultError(failure), duration_ms: duration, tokens: folded?.usage?.total ?? null, cost: folded?.usage?.cost ?? null, ...ids });
  }
}
