import { doneEvent, type AgentEvent } from '../contract/events.ts';
import { AppError, isAppError } from '../errors.ts';
import type { Store } from '../store/db.ts';
import { OPEN_INTERACTION_STATUSES } from '../store/interactions.ts';
import type { NewTurn, TurnEnd } from '../store/turns.ts';
import { databaseUnavailable } from '../store/unavailable.ts';
import { TurnFolder } from '../stream/fold.ts';
import { redactError } from '../telemetry/redact.ts';
import type { TurnMetrics } from '../telemetry/metrics.ts';
import type { TurnSpan } from '../telemetry/turn-span.ts';
import type { LiveTurn } from './live-turn.ts';
import type { PausedState } from './paused-state.ts';
import { isCancel } from './stop-reasons.ts';
import type { TurnLeases } from './turn-leases.ts';

/**
 * Runs a started turn to its end: its events told to its readers and its pauses stored as they
 * come, its failure put in the client's words, its end recorded. Apart from starting it because
 * this is the loop every event of every turn goes through.
 */

/** What `drive` needs besides the turn and its events. */
export interface DriveOptions {
  redact: <T>(v: T) => T;
  redactEvent: (event: AgentEvent) => AgentEvent[];
  /** What a pause keeps for the turn's continuation. */
  state: PausedState;
  /** A private session's turn, recorded only now that it ends; otherwise it is already, and leased. */
  unrecorded: NewTurn | undefined;
  span: TurnSpan | undefined;
  metrics: TurnMetrics | undefined;
}

/** The longest wait between two tries at storing a turn's end while the database is away. */
const RECORD_RETRY_MAX_MS = 30_000;

interface DriverDeps {
  store: Store;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
  leases: TurnLeases;
  /** This process's running turns, by id: a turn leaves it as it ends. */
  live: Map<string, LiveTurn>;
}

export class TurnDriver {
  private readonly deps: DriverDeps;

  constructor(deps: DriverDeps) {
    this.deps = deps;
  }

  async drive(turn: LiveTurn, events: AsyncGenerator<AgentEvent>, how: DriveOptions): Promise<void> {
    const { redact, redactEvent, state, unrecorded, span, metrics } = how;
    const { store, log } = this.deps;
    const folder = new TurnFolder();
    // Messages and thoughts begun and not yet ended: a turn that fails midway, whatever its engine
    // (harnesses and a dying turn thread included), ends them before its error, so every reader
    // (the fold, each projection, a replay) gets whole parts.
    const unended = new Map<string, 'message_end' | 'thought_end'>();
    // A stream's reader takes `done` as the turn's word that it ended so, a pause as one it may
    // answer: told before the end is stored, a server killed in between would leave a turn that
    // never paused, and an approval answered for it would be dropped. It is told once stored.
    let done: AgentEvent | undefined;
    const emit = (event: AgentEvent) => {
      // The engines know nothing of stored revisions: the turn's start tells which one runs.
      if (event.type === 'turn_start' && turn.revision) event = { ...event, data: { ...event.data, revision: turn.revision } };
      if (event.type === 'message_start' || event.type === 'thought_start') unended.set(event.data.id, event.type === 'message_start' ? 'message_end' : 'thought_end');
      else if (event.type === 'message_end' || event.type === 'thought_end') unended.delete(event.data.id);
      folder.push(event);
      span?.event(event);
      metrics?.event(event);
      if (event.type === 'done') done = event;
      else turn.push(event);
    };
    let status: 'completed' | 'paused' | 'failed' | 'cancelled' | 'interrupted' = 'completed';
    if (!unrecorded) this.deps.leases.hold(turn);
    // The conversation a pause keeps may repeat the caller's secrets in its own messages; the
    // database never gets them. Masked once, at the first pause: most turns never pause.
    let stored: PausedState | undefined;
    try {
      for await (const raw of events) {
        for (const event of redactEvent(raw)) {
          if (event.type === 'interaction_request') {
            if (!stored) {
              stored = redact(state);
              await store.pausedStates.save({ projectId: turn.projectId, sessionId: turn.sessionId, turnId: turn.id, state: stored });
            }
            await store.interactions.create({
              id: event.data.id,
              project_id: turn.projectId,
              session_id: turn.sessionId,
              turn_id: turn.id,
              kind: event.data.kind,
              tool_call_id: event.data.payload.tool_call_id,
              request: { tool: event.data.tool, args: event.data.payload.input, tool_call_id: event.data.payload.tool_call_id },
            });
          }
          emit(event);
        }
      }
      if (folder.result().stop_reason === 'paused') status = 'paused';
    } catch (error) {
      const reason = turn.controller.signal.reason;
      // Out of time is the turn's own failure; any other abort stopped it from outside.
      const timedOut = turn.controller.signal.aborted && isAppError(reason) && reason.type === 'turn-timeout';
      const aborted = turn.controller.signal.aborted && !timedOut;
      const failure = aborted
        ? new AppError(isCancel(reason) ? 'turn-cancelled' : 'unavailable', reason instanceof Error ? reason.message : 'the turn was stopped')
        : timedOut
          ? (reason as AppError)
          : isAppError(error)
            ? error
            : (databaseUnavailable(error) ?? new AppError('internal', 'the turn failed unexpectedly', { cause: error }));
      const ids = { turn_id: turn.id, session_id: turn.sessionId, trace_id: turn.traceId };
      const unexpected = !isAppError(error) && failure.type === 'internal';
      if (unexpected) log.error({ err: redactError(error, redact), ...ids }, 'turn failed');
      status = aborted ? (isCancel(reason) ? 'cancelled' : 'interrupted') : 'failed';
      if (aborted && isCancel(reason) && (await store.interactions.cancelPending(turn.projectId, turn.sessionId, [], OPEN_INTERACTION_STATUSES)) > 0) {
        await store.pausedStates.removeSession(turn.projectId, turn.sessionId);
      }
      turn.failure = new AppError(failure.type, redact(failure.message), { status: failure.status, ...(failure.headers ? { headers: failure.headers } : {}) });
      // A provider that is down or refuses its key fails turns whose stream was already answered
      // 200, and evaluation cases nobody's request waits on: only this line tells the operator why.
      if (!unexpected && !aborted) log.warn({ ...ids, error: { type: failure.type, message: turn.failure.message } }, 'turn failed');
      // Through the redactor, which still holds the end of a text that might begin a secret.
      for (const [id, type] of unended) for (const event of redactEvent({ type, data: { id } })) emit(event);
      emit({ type: 'error', data: { code: failure.status, type: failure.type, message: turn.failure.message } });
      emit(doneEvent(aborted ? (status as 'interrupted' | 'cancelled') : 'error'));
    }
    const folded = folder.result();
    const end: TurnEnd = {
      status,
      stop_reason: folded.stop_reason,
      output: { messages: folded.messages, ...(folded.pending_interaction ? { pending_interaction: folded.pending_interaction } : {}) },
      usage: folded.usage,
      error: folded.error,
    };
    const unstored = await this.recordEnd(turn, end, unrecorded);
    // The database went away before the turn's end was stored: it is not told as having ended
    // well (a pause stored nowhere cannot be answered); its end is stored once the database is back.
    if (unstored && !turn.failure) {
      turn.failure = new AppError(unstored.type, `the turn ran, but its end could not be stored: ${unstored.message}`, { status: unstored.status });
      turn.push({ type: 'error', data: { code: turn.failure.status, type: turn.failure.type, message: turn.failure.message } });
      done = doneEvent('error');
    }
    span?.end({ status, stopReason: folded.stop_reason, usage: folded.usage, error: turn.failure });
    metrics?.end(status, turn.failure, folded.usage);
    this.deps.live.delete(turn.id);
    if (done) turn.push(done);
    turn.finish(folded);
  }

  /**
   * Stores the turn's end and gives its lease back. Why it could not be stored when the database
   * is away: it is stored once the database is back.
   */
  private async recordEnd(turn: LiveTurn, end: TurnEnd, unrecorded: NewTurn | undefined): Promise<AppError | undefined> {
    const { store, leases, log } = this.deps;
    let unstored: AppError | undefined;
    const notRecorded = (error: unknown) => {
      unstored = databaseUnavailable(error, "agentd stores it once the database is back, to be read in the session's turns; sending the turn again would run it again");
      log.error({ err: error, turn_id: turn.id }, 'could not record the end of a turn');
    };
    if (unrecorded) {
      await store.turns.create(unrecorded, end).catch(notRecorded);
    } else {
      leases.letGo(turn);
      await store.turns.finish(turn.id, end, { project_id: turn.projectId, session_id: turn.sessionId }).catch(async (error: unknown) => {
        notRecorded(error);
        if (unstored) this.recordLater(turn, end);
        // The lease goes back even when the turn's row could not be written (on PostgreSQL both were one statement).
        await store.leases.release(turn.projectId, turn.sessionId, turn.id).catch((failed: unknown) => log.error({ err: failed, turn_id: turn.id }, 'could not release a lease'));
      });
    }
    return unstored;
  }

  /**
   * The end of a turn the database could not take (down, its disk full), written once it is back:
   * until then the turn reads as running. Only a turn still running changes, so one the lease
   * sweep has meanwhile recorded as interrupted stays so.
   */
  private recordLater(turn: LiveTurn, end: TurnEnd, delayMs = 1_000): void {
    const { store, log } = this.deps;
    const ids = { project_id: turn.projectId, session_id: turn.sessionId };
    const retry = setTimeout(() => {
      store.turns.finish(turn.id, end, ids).then(
        () => log.info({ turn_id: turn.id }, 'recorded the end of a turn once the database was back'),
        (error: unknown) => (databaseUnavailable(error) ? this.recordLater(turn, end, Math.min(delayMs * 2, RECORD_RETRY_MAX_MS)) : log.error({ err: error, turn_id: turn.id }, 'could not record the end of a turn')),
      );
    }, delayMs);
    // Never what keeps a stopping server alive: the next start records the turn as interrupted.
    retry.unref();
  }
}
