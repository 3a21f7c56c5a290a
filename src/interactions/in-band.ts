import { isDeepStrictEqual } from 'node:util';
import { messagePath } from '../contract/message-sources.ts';
import type { Message } from '../contract/messages.ts';
import { toolOutputText } from '../contract/tool-messages.ts';
import type { HistoryCall } from '../agent/history.ts';
import { AppError } from '../errors.ts';
import type { Store } from '../store/db.ts';
import type { InteractionRecord } from '../store/interactions.ts';
import { lateAnswer } from './late-answers.ts';

export interface InBandAnswers {
  /** The history with each approved call's input replaced by the input that was approved. */
  history: Message[];
  /** Interaction ids this turn answers; claimed (resolved) before the turn runs. */
  answered: Array<{ id: string; answer: Record<string, unknown> }>;
  /** The turn that paused on those interactions. */
  pausedTurnId?: string;
}

/**
 * Checks every answer the caller re-posted against the interaction records. An approval is only
 * honoured for a call this session actually paused on, while it is still pending, and it runs the
 * input that was shown for approval — never an input edited in the re-post.
 */
export async function readInBandAnswers(
  store: Store,
  projectId: string,
  sessionId: string,
  history: Message[],
  trailing: HistoryCall[],
  /** Interactions answered through the API whose continuation this is: they are `responded`. */
  outOfBand: ReadonlySet<string> = new Set(),
): Promise<InBandAnswers> {
  if (trailing.length === 0) return { history, answered: [] };
  const pending = await store.interactions.listPending(projectId, sessionId);
  const pendingByCall = new Map(pending.map((r) => [r.tool_call_id, r]));
  // A continuation of answers given through the API (`outOfBand`) gives no others: a re-post that
  // repeats them was checked against them already (`earlierAnswers`).
  const answeredBefore = outOfBand.size ? new Map<string, InteractionRecord>() : await settledOfLastPause(store, projectId, sessionId, trailing, pendingByCall);
  const out = history.slice();
  const answered: InBandAnswers['answered'] = [];
  let pausedTurnId: string | undefined;

  for (const call of trailing) {
    const at = (detail = '') => messagePath(history, call.index, detail);
    if (call.approval && call.approval.approved !== undefined && !call.result) {
      const record = await store.interactions.get(projectId, call.approval.id);
      if (!record || record.session_id !== sessionId || record.kind !== 'user_approval') {
        throw new AppError('invalid-approval', `no approval "${call.approval.id}" is known in this session (${at('.approval.id')})`);
      }
      if (record.tool_call_id !== call.toolCallId) {
        throw new AppError('invalid-approval', `approval "${record.id}" belongs to tool call "${record.tool_call_id}", not "${call.toolCallId}" (${at()})`);
      }
      if (record.status !== 'pending' && !(record.status === 'responded' && outOfBand.has(record.id))) {
        throw new AppError('interaction-not-pending', lateAnswer(record.id, record, ` (${at('.approval')})`));
      }
      out[call.index] = { ...history[call.index]!, input: record.request.args };
      answered.push({ id: record.id, answer: { approved: call.approval.approved, ...(call.approval.reason ? { reason: call.approval.reason } : {}) } });
      pausedTurnId = record.turn_id;
      continue;
    }
    if (call.result) {
      const record = pendingByCall.get(call.toolCallId);
      const before = answeredBefore.get(call.toolCallId);
      if (before) {
        throw new AppError('interaction-not-pending', lateAnswer(before.id, before, ` (${messagePath(history, call.result.index)})`));
      }
      if (record?.kind === 'client_tool') {
        answered.push({ id: record.id, answer: call.result.isError ? { error: call.result.content } : { output: call.result.content } });
        pausedTurnId = record.turn_id;
      }
      // A Vercel tool part re-posted as `output-denied` is a denial given in band too: it comes
      // with its denial result already, so only the record is left to settle.
      if (record?.kind === 'user_approval' && call.approval?.id === record.id && call.approval.approved === false) {
        answered.push({ id: record.id, answer: { approved: false, ...(call.approval.reason ? { reason: call.approval.reason } : {}) } });
        pausedTurnId = record.turn_id;
      }
      continue;
    }
    if (call.approval) {
      throw new AppError('invalid-approval', `tool call "${call.toolCallId}" awaits a decision: re-post it with approval.approved true or false (${at('.approval')})`);
    }
    const record = pendingByCall.get(call.toolCallId);
    throw new AppError(
      'invalid-messages',
      record?.kind === 'client_tool'
        ? `client tool call "${call.toolCallId}" awaits its result: append {"role":"tool","tool_call_id":"${call.toolCallId}","content":…} after it (${at()})`
        : `tool call "${call.toolCallId}" has no result (${at()}); append its tool-result message`,
    );
  }
  return { history: out, answered, ...(pausedTurnId ? { pausedTurnId } : {}) };
}

/**
 * The interactions of the session's last pause that the re-post gives a result for while nothing
 * waits on them any more, by tool call: a result is a client tool's answer (or, re-posted as
 * `output-denied`, an approval's), and a second answer is refused as a second decision is. The
 * results of calls of earlier pauses are the conversation's history: the turn that took them up
 * paused again. Only a re-post that carries such results reads the records again.
 */
async function settledOfLastPause(
  store: Store,
  projectId: string,
  sessionId: string,
  trailing: HistoryCall[],
  pendingByCall: ReadonlyMap<string, InteractionRecord>,
): Promise<Map<string, InteractionRecord>> {
  if (!trailing.some((call) => call.result && !pendingByCall.has(call.toolCallId))) return new Map();
  const others = trailing.filter((call) => !pendingByCall.has(call.toolCallId)).map((call) => call.toolCallId);
  const newest = new Map<string, InteractionRecord>();
  for (const record of await store.interactions.ofToolCalls(projectId, sessionId, others)) {
    if (!newest.has(record.tool_call_id)) newest.set(record.tool_call_id, record);
  }
  const records = [...newest.values(), ...trailing.flatMap((call) => pendingByCall.get(call.toolCallId) ?? [])];
  if (records.length === 0) return newest;
  const lastPause = records.reduce((a, b) => (b.created_at > a.created_at ? b : a)).turn_id;
  const results = new Set(trailing.filter((call) => call.result).map((call) => call.toolCallId));
  return new Map([...newest].filter(([call, record]) => results.has(call) && record.turn_id === lastPause));
}

/** What a re-post's answers were already given as, through the API. */
export type EarlierAnswers =
  /** Answered, and not yet taken up: the re-post's turn is their continuation. */
  | { responded: ReadonlySet<string> }
  /** Taken up by this turn already: the re-post follows it. */
  | { continuation: string };

/** Whether the re-post says of `call` what the API's answer in `record` said. */
function sameAnswer(call: HistoryCall, record: InteractionRecord): boolean {
  const answer = record.answer ?? {};
  if (record.kind === 'user_approval') return call.approval?.approved === undefined || answer.approved === call.approval.approved;
  if (record.kind !== 'client_tool' || !call.result) return true;
  if (typeof answer.error === 'string') return call.result.isError && call.result.content === answer.error;
  if (call.result.isError) return false;
  // As the continuation gave it to the model (continuation.ts); an object may come back re-serialized.
  const output = 'output' in answer ? answer.output : answer;
  return call.result.content === toolOutputText(output) || isDeepStrictEqual(parsedJson(call.result.content), output);
}

function parsedJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const answeredThroughApi = (record: InteractionRecord) => record.status === 'responded' || (record.status === 'resolved' && record.resolution?.via === 'out_of_band');

/**
 * Reads a re-post that only repeats answers given through the API. The reference's client-tool
 * lifecycle does so: it answers the call with `/transition`, then re-posts it in band with its
 * result. Such a re-post asks to see the continuation, not to answer twice. Undefined when the
 * re-post answers something itself or answers nothing that was paused on. One that answers a call
 * otherwise than the API did is a second answer, a 409: refused here, before it could take the
 * session over from the continuation the API's answer started.
 */
export async function earlierAnswers(store: Store, projectId: string, sessionId: string, trailing: HistoryCall[]): Promise<EarlierAnswers | undefined> {
  const answering = trailing.filter((call) => call.result !== undefined || call.approval?.approved !== undefined);
  if (answering.length === 0) return undefined;
  const newest = new Map<string, InteractionRecord>();
  for (const record of await store.interactions.ofToolCalls(projectId, sessionId, answering.map((c) => c.toolCallId))) {
    if (!newest.has(record.tool_call_id)) newest.set(record.tool_call_id, record);
  }
  const found = answering.flatMap((call) => {
    const record = newest.get(call.toolCallId);
    return record ? [{ call, record }] : [];
  });
  if (found.length === 0) return undefined;
  // Calls of earlier pauses in the same stretch of the conversation are history by now.
  const paused = found.reduce((a, b) => (b.record.created_at > a.record.created_at ? b : a)).record.turn_id;
  const current = found.filter(({ record }) => record.turn_id === paused);
  const other = current.find(({ call, record }) => answeredThroughApi(record) && !sameAnswer(call, record));
  if (other) throw new AppError('interaction-not-pending', lateAnswer(other.record.id, other.record, ' again (the answer given through the API differs from this re-post)'));
  const records = current.map(({ record }) => record);
  if (records.every((r) => r.status === 'responded')) return { responded: new Set(records.map((r) => r.id)) };
  const takenBy = new Set(records.map((r) => (r.status === 'resolved' && r.resolution?.via === 'out_of_band' ? r.resolution.turn_id : undefined)));
  const [turn] = takenBy;
  return takenBy.size === 1 && typeof turn === 'string' ? { continuation: turn } : undefined;
}
