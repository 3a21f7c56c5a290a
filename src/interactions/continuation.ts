import { setTimeout as sleep } from 'node:timers/promises';
import type { UIMessage } from 'ai';
import type { Message } from '../contract/messages.ts';
import { isAppError } from '../errors.ts';
import { toolOutputText, toolResultMessage } from '../contract/tool-messages.ts';
import { nativeToUi } from '../stream/native-to-ui.ts';
import { streamMessageId } from '../stream/vercel.ts';
import type { PausedState } from '../sessions/paused-state.ts';
import type { TurnService } from '../sessions/turn-service.ts';
import type { Store } from '../store/db.ts';
import type { InteractionRecord } from '../store/interactions.ts';

export interface ContinuationDeps {
  store: Store;
  turns: TurnService;
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
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

/**
 * Continues a turn paused on interactions answered through the API (`responded`). It waits until
 * every interaction of that turn has an answer, then runs the next turn of the session from the
 * state stored at the pause — in this process, whichever process paused it. A state is written
 * once per turn, so one the caller has just read (`known`) is the stored one, and a 225 KB
 * conversation is not read and parsed again.
 */
export async function continuePausedTurn(deps: ContinuationDeps, projectId: string, pausedTurnId: string, known?: PausedState): Promise<void> {
  for (;;) {
    const busy = await continueOnce(deps, projectId, pausedTurnId, known);
    if (!busy) return;
    // Another turn took the session first. One that goes on takes these answers up or abandons
    // them as it starts; one refused as it starts (a different answer given in band at the same
    // instant) leaves them `responded`, and nothing but this continuation would ever run them.
    try {
      await sessionFreed(deps.store, projectId, busy);
    } catch (error) {
      deps.log.warn({ err: error, turn_id: pausedTurnId }, 'could not continue a paused turn');
      return;
    }
  }
}

const FREED_POLL_MS = 50;

/** Resolves once no live lease holds the session (its holder ended, or died and its lease ran out). */
async function sessionFreed(store: Store, projectId: string, sessionId: string): Promise<void> {
  while ((await store.leases.get(projectId, sessionId))?.live) await sleep(FREED_POLL_MS);
}

/** One try at the continuation; the session it is for when another turn held that session. */
async function continueOnce(deps: ContinuationDeps, projectId: string, pausedTurnId: string, known?: PausedState): Promise<string | undefined> {
  const { store, turns, log } = deps;
  const { items } = await store.interactions.query(projectId, { turn_id: pausedTurnId }, { limit: 200 });
  if (items.some((r) => r.status === 'pending')) return;
  const answered = items.filter((r) => r.status === 'responded');
  const first = answered[0];
  if (!first) return;
  const paused = await store.turns.get(projectId, pausedTurnId);
  const state = known ?? ((await store.pausedStates.get(projectId, pausedTurnId)) as PausedState | undefined);
  if (!paused || !state) {
    log.warn({ turn_id: pausedTurnId }, 'a paused turn cannot be continued: its stored state is missing');
    return;
  }
  const pausedOutput = ((paused.output as { messages?: Message[] } | null)?.messages ?? []) as Message[];
  const output = decidedOutput(pausedOutput, answered);
  const told = clientResults(output, answered);
  // The message a client holds: its client tools' parts are settled by the results the turn tells.
  const continues = answeredMessage(pausedTurnId, state, output);
  try {
    await turns.run({
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
  } catch (error) {
    if (isAppError(error) && error.type === 'session-busy') return first.session_id;
    // Left `responded`: the next start (or the next answer) tries again.
    log.warn({ err: error, turn_id: pausedTurnId }, 'could not continue a paused turn');
  }
  return undefined;
}

/** At start: answers given while no process could continue them (a crash, a restart) are picked up. */
export async function resumeAnswered(deps: ContinuationDeps): Promise<number> {
  const records = await deps.store.interactions.listByStatus('responded', 1000);
  const turns = new Map(records.map((r) => [r.turn_id, r.project_id]));
  for (const [turnId, projectId] of turns) await continuePausedTurn(deps, projectId, turnId);
  if (turns.size) deps.log.info({ turns: turns.size }, 'continued turns answered while the server was down');
  return turns.size;
}
