import { setTimeout as sleep } from 'node:timers/promises';
import type { UIMessage } from 'ai';
import type { Message } from '../contract/messages.ts';
import type { ErrorType } from '../contract/errors.ts';
import { AppError, isAppError } from '../errors.ts';
import { toolOutputText, toolResultMessage } from '../contract/tool-messages.ts';
import { nativeToUi } from '../stream/native-to-ui.ts';
import { streamMessageId } from '../stream/vercel.ts';
import type { PausedState } from '../sessions/paused-state.ts';
import type { TurnService } from '../sessions/turn-service.ts';
import type { Store } from '../store/db.ts';
import type { InteractionRecord } from '../store/interactions.ts';
import type { TurnRecord } from '../store/turns.ts';
import { databaseUnavailable } from '../store/unavailable.ts';
import { recordFailedStart, recordRetriedStart } from './failed-start.ts';

export interface ContinuationDeps {
  store: Store;
  turns: TurnService;
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

/** The paused turn's output with the API's approval decisions written in, as an in-band re-post would carry them. */
function decidedOutput(output: Message[], answered: InteractionRecord[]): Message[] {
  const messages = [...output];
  for (const record of answered) {
    if (record.kind !== 'user_approval') continue;
    const at = messages.findIndex((m) => m.tool_call_id === record.tool_call_id && m.tool_name !== undefined);
    if (at < 0) continue;
    const answer = record.answer ?? {};
    messages[at] = { ...messages[at]!, approval: { id: record.id, approved: answer.approved === true, ...(typeof answer.reason === 'string' ? { reason: answer.reason } : {}) } };
  }
  return messages;
}

/** A client tool's answer as its result: its output as the caller gave it, or the error it failed with. */
type ClientResult = { id: string; output: unknown; is_error: boolean };

/**
 * What the caller's client tools answered through the API, as results, in the order of their
 * calls. No message the caller holds has them, so the continuation tells them as its own (its
 * output begins with them, as it begins with an approved call's result), or a conversation posted
 * back later would hold the calls without their answers.
 */
function clientResults(output: Message[], answered: InteractionRecord[]): ClientResult[] {
  const callAt = (record: InteractionRecord) => output.findIndex((m) => m.tool_call_id === record.tool_call_id && m.tool_name !== undefined);
  return answered
    .filter((record) => record.kind === 'client_tool' && callAt(record) >= 0)
    .sort((a, b) => callAt(a) - callAt(b))
    .map((record) => {
      const answer = record.answer ?? {};
      const failed = typeof answer.error === 'string';
      return { id: record.tool_call_id, output: failed ? answer.error : 'output' in answer ? answer.output : answer, is_error: failed };
    });
}

/**
 * `messages` followed by the results, as the conversation reads when it is posted back: the
 * paused output, then this turn's, which begins with them. A result put right after its call
 * would split the step's calls in two for the model (one call, its result, the next call), and
 * the turn after would read it otherwise.
 */
function withResults(messages: Message[], results: readonly ClientResult[]): Message[] {
  return [...messages, ...results.map((result) => toolResultMessage(result.id, toolOutputText(result.output), result.is_error))];
}

/**
 * The Vercel message a client of the paused turn holds, answered: the message the continuation
 * goes on, so a `useChat` page that resumes the session appends to it (and one that holds nothing
 * gets it rebuilt) instead of meeting results of calls it never saw.
 */
function answeredMessage(pausedTurnId: string, state: PausedState, output: Message[]): UIMessage | undefined {
  return nativeToUi(output, { messageId: streamMessageId(pausedTurnId, state.continues), continues: state.continues })[0];
}

/** The waits between tries at a continuation whose start failed for a reason that may pass. */
const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 60_000;

/**
 * Why a start failed that may pass by itself: an MCP server or the model provider not reachable
 * (or not answering as one: a server being redeployed), the database away or its disk full, a
 * harness pool busy. Any other failure (a refusal of what is stored, a bug) would fail the same way
 * at every try.
 */
const PASSING: ReadonlySet<ErrorType> = new Set(['mcp-unavailable', 'unavailable', 'insufficient-storage', 'upstream-error', 'upstream-timeout', 'upstream-unavailable', 'upstream-rate-limited']);

/** A failed try as the turns list tells it, and whether another try may work. */
function failureOf(error: unknown): { error: AppError; passing: boolean } {
  if (isAppError(error)) return { error, passing: PASSING.has(error.type) };
  const down = databaseUnavailable(error, 'the continuation waits for it');
  if (down) return { error: down, passing: true };
  return { error: new AppError('internal', 'the continuation could not start: agentd failed unexpectedly (logged)', { cause: error }), passing: false };
}

/**
 * Continues a turn paused on interactions answered through the API (`responded`). It waits until
 * every interaction of that turn has an answer, then runs the next turn of the session from the
 * state stored at the pause — in this process, whichever process paused it. A state is written
 * once per turn, so one the caller has just read (`known`) is the stored one, and a 225 KB
 * conversation is not read and parsed again.
 *
 * A start that fails for a reason that may pass is tried again (1 s, doubling up to 60 s) until it
 * starts or the answers are settled otherwise (answered in band, cancelled), and is recorded once
 * as a failed turn of the session meanwhile (failed-start.ts); one that cannot work is recorded as
 * failed once, taking the answers up. `signal` (the server stopping) ends the waits at once: the
 * answers stay `responded` and the next start continues them.
 */
export async function continuePausedTurn(deps: ContinuationDeps, projectId: string, pausedTurnId: string, known?: PausedState, signal?: AbortSignal): Promise<void> {
  const { log } = deps;
  const ids = { turn_id: pausedTurnId, project_id: projectId };
  let delay = FIRST_RETRY_MS;
  let failing: { since: number; attempts: number; type: string; recorded: boolean } | undefined;
  while (!signal?.aborted) {
    let outcome: Outcome | undefined;
    let thrown: unknown;
    try {
      const once = await continueOnce(deps, projectId, pausedTurnId, known);
      // Another turn took the session first. One that goes on takes these answers up or abandons
      // them as it starts; one refused as it starts (a different answer given in band at the same
      // instant) leaves them `responded`, and nothing but this continuation would ever run them.
      if ('busy' in once) {
        await sessionFreed(deps.store, projectId, once.busy, signal);
        continue;
      }
      outcome = once;
    } catch (error) {
      thrown = error;
    }
    if (outcome) {
      if (failing && 'started' in outcome) log.info({ ...ids, continuation_turn_id: outcome.started, failed_attempts: failing.attempts, failing_ms: Date.now() - failing.since }, 'continued a paused turn whose start had failed');
      else if (failing) log.info({ ...ids, failed_attempts: failing.attempts }, 'stopped trying to continue a paused turn: its answers were settled otherwise');
      return;
    }
    if (signal?.aborted) return;
    const { error, passing } = failureOf(thrown);
    const paused = await deps.store.turns.get(projectId, pausedTurnId).catch(() => undefined);
    if (!passing) {
      if (!isAppError(thrown)) log.error({ ...ids, err: thrown }, 'could not continue a paused turn');
      else log.warn({ ...ids, error: { type: error.type, message: error.message } }, 'could not continue a paused turn, and will not try again');
      await recordPermanent(deps, projectId, pausedTurnId, paused, error);
      return;
    }
    failing ??= { since: Date.now(), attempts: 0, type: '', recorded: false };
    failing.attempts++;
    // Once a run of failures, and again when the reason changes (the MCP server back, the database gone).
    if (failing.type !== error.type) {
      failing.type = error.type;
      log.warn({ ...ids, error: { type: error.type, message: error.message } }, 'could not continue a paused turn; agentd tries again until it starts, and logs once more then');
    }
    if (!failing.recorded && paused) {
      const state = known ?? ((await deps.store.pausedStates.get(projectId, pausedTurnId).catch(() => undefined)) as PausedState | undefined);
      failing.recorded = await recordRetriedStart(deps.store, { pausedTurn: paused, state, error }).then(
        () => true,
        () => false,
      );
    }
    await sleep(delay, undefined, signal ? { signal } : {}).catch(() => undefined);
    delay = Math.min(delay * 2, MAX_RETRY_MS);
  }
}

/** A start that can never work, recorded as a failed turn taking its answers up (failed-start.ts). */
async function recordPermanent(deps: ContinuationDeps, projectId: string, pausedTurnId: string, paused: TurnRecord | undefined, error: AppError): Promise<void> {
  const { store, log } = deps;
  if (!paused) return;
  try {
    const { items } = await store.interactions.query(projectId, { turn_id: pausedTurnId }, { limit: 200 });
    const answered = items.filter((r) => r.status === 'responded').map((r) => r.id);
    if (answered.length === 0) return;
    const state = (await store.pausedStates.get(projectId, pausedTurnId)) as PausedState | undefined;
    await recordFailedStart(store, { pausedTurn: paused, state, error }, answered);
  } catch (failed) {
    log.error({ err: failed, turn_id: pausedTurnId }, 'could not record a continuation that failed to start');
  }
}

const FREED_POLL_MS = 50;

/** Resolves once no live lease holds the session (its holder ended, or died and its lease ran out), or `signal` aborts. */
async function sessionFreed(store: Store, projectId: string, sessionId: string, signal: AbortSignal | undefined): Promise<void> {
  while (!signal?.aborted && (await store.leases.get(projectId, sessionId))?.live) await sleep(FREED_POLL_MS);
}

/** How one try went: the turn it started, the session another turn held, or nothing left to continue. */
type Outcome = { started: string } | { busy: string } | { settled: true };

/** One try at the continuation; throws what refused its start. */
async function continueOnce(deps: ContinuationDeps, projectId: string, pausedTurnId: string, known?: PausedState): Promise<Outcome> {
  const { store, turns } = deps;
  const { items } = await store.interactions.query(projectId, { turn_id: pausedTurnId }, { limit: 200 });
  if (items.some((r) => r.status === 'pending')) return { settled: true };
  const answered = items.filter((r) => r.status === 'responded');
  const first = answered[0];
  if (!first) return { settled: true };
  const paused = await store.turns.get(projectId, pausedTurnId);
  const state = known ?? ((await store.pausedStates.get(projectId, pausedTurnId)) as PausedState | undefined);
  if (!paused || !state) throw new AppError('internal', 'the continuation could not start: the state stored at the pause is missing');
  const pausedOutput = ((paused.output as { messages?: Message[] } | null)?.messages ?? []) as Message[];
  const output = decidedOutput(pausedOutput, answered);
  const told = clientResults(output, answered);
  // The message a client holds: its client tools' parts are settled by the results the turn tells.
  const continues = answeredMessage(pausedTurnId, state, output);
  try {
    const turn = await turns.run({
      projectId,
      sessionId: first.session_id,
      template: state.template,
      messages: [...state.history, ...withResults(output, told)],
      ...(told.length ? { told } : {}),
      secrets: {},
      credentials: undefined,
      traceparent: `00-${paused.trace_id}-${paused.span_id}-01`,
      record: {
        continues: pausedTurnId,
        via: 'out_of_band',
        ...(state.references ? { references: state.references } : {}),
        ...(state.revision ? { revision: state.revision } : {}),
      },
      force: false,
      // Nobody asked for it, but a client following the session usually attaches to it (force).
      streaming: true,
      outOfBand: new Set(answered.map((r) => r.id)),
      ...(continues ? { continues } : {}),
    });
    return { started: turn.id };
  } catch (error) {
    if (isAppError(error) && error.type === 'session-busy') return { busy: first.session_id };
    // Answered in band, or cancelled, between the look and the claim.
    if (isAppError(error) && error.type === 'interaction-not-pending') return { settled: true };
    throw error;
  }
}

/** The turns paused on answers given while no process could continue them (a crash, a restart), by project. */
export async function answeredWhileDown(store: Store): Promise<Map<string, string>> {
  const records = await store.interactions.listByStatus('responded', 1000);
  return new Map(records.map((r) => [r.turn_id, r.project_id]));
}
