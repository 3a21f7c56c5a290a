import type { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import type { PausedState } from '../sessions/paused-state.ts';
import type { Store } from '../store/db.ts';
import type { TurnRecord } from '../store/turns.ts';
import { startSpan } from '../telemetry/trace-context.ts';

/** What a failed start of a continuation is recorded from. */
export interface FailedStart {
  pausedTurn: TurnRecord;
  state: PausedState | undefined;
  error: AppError;
}

/**
 * Records a continuation that could not start as a failed turn of the session, continuing the
 * paused turn's trace: where a client reads a continuation's outcome (the session's turns), the
 * same shape as a continuation that started and then failed. The answers stay `responded`, and
 * the turn that continues once a try works is the next turn. Recorded once a run of failures: a
 * restart (or another replica) that fails again finds it the session's latest turn.
 */
export async function recordRetriedStart(store: Store, failed: FailedStart): Promise<void> {
  const { pausedTurn } = failed;
  const [latest] = await store.turns.listForSession(pausedTurn.project_id, pausedTurn.session_id, { limit: 1 });
  if (latest && latest.status === 'failed' && latest.request?.continues === pausedTurn.id) return;
  const message = `${sentence(failed.error.message)} The answers stay responded, and agentd tries the continuation again until it starts (it is then the next turn of this session); cancel them to stop it (POST /api/sessions/interactions/transition)`;
  await store.turns.create(turnOf(failed), endOf(failed.error, message));
}

/**
 * Records a continuation that can never start (its stored state unusable, a refusal no retry
 * changes) as a failed turn that took the answers up, once: they become `resolved` by it, as they
 * would be by a continuation that started and failed, and the pause is settled. Nothing when
 * the answers were settled meanwhile (answered in band, cancelled).
 */
export async function recordFailedStart(store: Store, failed: FailedStart, answered: readonly string[]): Promise<boolean> {
  const { pausedTurn } = failed;
  const turn = turnOf(failed);
  const projectId = pausedTurn.project_id;
  // Recorded before the answers are claimed, as a turn that starts is (turn-setup.ts).
  await store.turns.create(turn);
  const claim = answered.map((id) => ({ id, from: ['responded' as const], to: 'resolved' as const, resolution: { via: 'out_of_band', turn_id: turn.id } }));
  if (await store.interactions.transitionAll(projectId, claim)) {
    await store.turns.removeUnstarted(projectId, turn.id);
    return false;
  }
  await store.pausedStates.removeSession(projectId, pausedTurn.session_id);
  await store.turns.finish(turn.id, endOf(failed.error, `${sentence(failed.error.message)} The answers were taken up by this turn and are not tried again: send a new message to go on`));
  return true;
}

function turnOf({ pausedTurn, state }: FailedStart) {
  const trace = startSpan(`00-${pausedTurn.trace_id}-${pausedTurn.span_id}-01`);
  return {
    id: newId(),
    project_id: pausedTurn.project_id,
    session_id: pausedTurn.session_id,
    trace_id: trace.traceId,
    span_id: trace.spanId,
    parent_span_id: pausedTurn.span_id,
    request: {
      continues: pausedTurn.id,
      via: 'out_of_band',
      ...(state?.references ? { references: state.references } : {}),
      ...(state?.revision ? { revision: state.revision } : {}),
    },
  };
}

/** `text` as a sentence, to tell what happens next after it. */
const sentence = (text: string) => (/[.!?]$/.test(text) ? text : `${text}.`);

function endOf(error: AppError, message: string) {
  return { status: 'failed' as const, stop_reason: 'error' as const, output: { messages: [] }, error: { code: error.status, type: error.type, message } };
}
