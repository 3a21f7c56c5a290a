import { ApprovalAnswer, ApprovalVerdict, ClientToolAnswer, InputAnswer, type InteractionQuery, type InteractionRecord, type InteractionStatus, type TransitionBody } from '../contract/interactions.ts';
import { safeParseNullsAbsent } from '../contract/optional-nulls.ts';
import { describeIssue } from '../contract/zod-errors.ts';
import { AppError, isAppError } from '../errors.ts';
import type { PausedState } from '../sessions/paused-state.ts';
import type { Store } from '../store/db.ts';
import type { InteractionRecord as StoredInteraction } from '../store/interactions.ts';
import { answeredWhileDown, continuePausedTurn, type ContinuationDeps } from './continuation.ts';
import { lateAnswer } from './late-answers.ts';

/** The record as the API shows it, with the reference's `token` and `data` beside agentd's own fields. */
function interactionView(record: StoredInteraction): InteractionRecord {
  return {
    id: record.id,
    project_id: record.project_id,
    session_id: record.session_id,
    turn_id: record.turn_id,
    kind: record.kind,
    status: record.status,
    request: record.request,
    ...(record.answer ? { answer: record.answer } : {}),
    ...(record.resolution ? { resolution: record.resolution } : {}),
    token: record.id,
    data: { request: record.request, ...(record.resolution ? { resolution: record.resolution } : {}) },
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}

const ANSWER_SCHEMA = { user_approval: ApprovalAnswer, client_tool: ClientToolAnswer, user_input: InputAnswer } as const;

/**
 * Legal moves of the transition operation (design.md §4). Answering (`pending → responded`) needs
 * an answer, so it goes through respond, or comes with one as its resolution. `resolved` says a
 * turn took the answer up, which only that turn can say: set from outside, it would leave the
 * paused turn waiting for good on an interaction nothing answers. `resolved` and `cancelled` are
 * final.
 */
const MOVES: Record<InteractionStatus, readonly InteractionStatus[]> = {
  pending: [],
  responded: [],
  resolved: [],
  cancelled: ['pending', 'responded'],
};

/** What to do instead of a move the transition operation does not make. */
function instead(from: InteractionStatus, to: InteractionStatus): string {
  const resolvedBy = '; an interaction is resolved by the turn that takes its answer up';
  if (from === 'pending' && to === 'responded') return '; send its answer as the resolution, or answer it with POST /api/sessions/interactions/{id}/respond';
  if (from === 'pending' && to === 'resolved') {
    return `${resolvedBy}: answer it with POST /api/sessions/interactions/{id}/respond (or a transition with the answer as its resolution, an approval's as {verdict, tool_call_id}), or drop it with a transition to cancelled`;
  }
  if (from === 'responded' && to === 'resolved') return `${resolvedBy}, and this one is answered already: its turn continues by itself`;
  return '';
}

/** Marks a cancel made here when the caller sent no resolution: a turn that abandons a pause leaves none (late-answers.ts). */
const CANCELLED_HERE = { via: 'transition' };

/**
 * The answer a resolution sent with `responded` gives, as `respond` takes it: the reference's
 * clients resolve an approval as `{verdict, tool_call_id}` and a client tool with its output.
 */
function answerOfResolution(kind: StoredInteraction['kind'], resolution: Record<string, unknown>): Record<string, unknown> {
  if (kind === 'user_approval') {
    const verdict = ApprovalVerdict.safeParse(resolution);
    if (!verdict.success) return resolution;
    const { verdict: said, ...rest } = verdict.data;
    return { approved: said === 'approved', ...rest };
  }
  if (kind === 'client_tool' && !ClientToolAnswer.safeParse(resolution).success) return { output: resolution };
  return resolution;
}

/** The answer as stored: an approval's `message` is its reason; its `tool_call_id` only has to match. */
function normalizeAnswer(record: StoredInteraction, answer: Record<string, unknown>): Record<string, unknown> {
  if (record.kind !== 'user_approval') return answer;
  const { message, tool_call_id, ...approval } = answer as ApprovalAnswer;
  if (tool_call_id !== undefined && tool_call_id !== record.tool_call_id) {
    throw new AppError('invalid-request', `interaction "${record.id}" gates tool call "${record.tool_call_id}", not "${tool_call_id}" (answer.tool_call_id)`);
  }
  return approval.reason === undefined && message !== undefined ? { ...approval, reason: message } : approval;
}

export class InteractionService {
  private readonly deps: ContinuationDeps;
  /** Continuations this process runs (or retries), by paused turn: one at a time each, so a failed start is tried and recorded once. */
  readonly continuing = new Map<string, Promise<void>>();
  /** Aborts at shutdown: a continuation waiting to try again stops, and the next start picks its answers up. */
  private readonly stopping = new AbortController();

  constructor(deps: ContinuationDeps) {
    this.deps = deps;
  }

  private get store(): Store {
    return this.deps.store;
  }

  async get(projectId: string, id: string): Promise<InteractionRecord> {
    const record = await this.store.interactions.get(projectId, id);
    if (!record) throw new AppError('not-found', `no interaction "${id}" in this project`);
    return interactionView(record);
  }

  async query(projectId: string, query: InteractionQuery): Promise<{ count: number; interactions: InteractionRecord[]; next?: string }> {
    const { limit, cursor, ...filters } = query;
    const page = await this.store.interactions.query(projectId, filters, { limit: limit ?? 50, cursor });
    return { count: page.items.length, interactions: page.items.map(interactionView), ...(page.next ? { next: page.next } : {}) };
  }

  /**
   * Answers a pending interaction, atomically: of two concurrent answers one wins, the other gets
   * 409. The paused turn then continues in the background once all its interactions are answered.
   */
  async respond(projectId: string, id: string, answer: Record<string, unknown>): Promise<InteractionRecord> {
    const record = await this.store.interactions.get(projectId, id);
    if (!record) throw new AppError('not-found', `no interaction "${id}" in this project`);
    // Spec §3.1: respond on a record that is not pending is a 409, whatever the answer says; a
    // client holding an answer it cannot use is told the interaction moved on, not how to write it.
    if (record.status !== 'pending') throw new AppError('interaction-not-pending', lateAnswer(id, record));
    const parsed = safeParseNullsAbsent(ANSWER_SCHEMA[record.kind], answer);
    if (!parsed.success) {
      const shape = record.kind === 'user_approval' ? '{"approved": true|false, "reason"?: "…"}' : record.kind === 'client_tool' ? '{"output": …} or {"error": "…"}' : 'an object';
      throw new AppError('invalid-request', `a ${record.kind} answer is ${shape}: ${describeIssue('answer', parsed.error.issues[0]!)}`);
    }
    const normalized = normalizeAnswer(record, parsed.data);
    const state = await this.checkContinuable(projectId, record);
    const answered = await this.store.interactions.transition(projectId, id, { from: ['pending'], to: 'responded', answer: normalized });
    if (!answered) {
      const now = await this.store.interactions.get(projectId, id);
      throw new AppError('interaction-not-pending', lateAnswer(id, now));
    }
    this.continueInBackground(projectId, record.turn_id, state);
    return interactionView(answered);
  }

  async transition(projectId: string, change: TransitionBody): Promise<InteractionRecord> {
    const id = (change.interaction_id ?? change.token)!;
    const record = await this.store.interactions.get(projectId, id);
    if (!record || (change.session_id !== undefined && record.session_id !== change.session_id)) {
      throw new AppError('not-found', `no interaction "${id}" in ${change.session_id === undefined ? 'this project' : `session "${change.session_id}"`}`);
    }
    // The reference's client-tool lifecycle answers here: `responded`, with the answer as its resolution.
    if (change.status === 'responded' && change.resolution) return this.respond(projectId, record.id, answerOfResolution(record.kind, change.resolution));
    // Its settlement of an approval is `resolved` with `{verdict, tool_call_id}`: an answer while the
    // approval waits, and a repeat of the answer once given (the turn resolves it itself).
    if (change.status === 'resolved' && change.resolution && record.kind === 'user_approval') {
      const answer = answerOfResolution(record.kind, change.resolution);
      if (record.status === 'pending') return this.respond(projectId, record.id, answer);
      if (record.answer?.approved === answer.approved && record.status !== 'cancelled') return interactionView(record);
    }
    const from = MOVES[change.status];
    if (!from.includes(record.status)) {
      throw new AppError('interaction-not-pending', `interaction "${record.id}" cannot move from ${record.status} to ${change.status}${instead(record.status, change.status)}`);
    }
    const moved = await this.store.interactions.transition(projectId, record.id, { from, to: change.status, resolution: change.resolution ?? CANCELLED_HERE });
    if (!moved) throw new AppError('interaction-not-pending', `interaction "${record.id}" changed meanwhile; read it again`);
    return interactionView(moved);
  }

  /**
   * An answer through the API is acted on with the server's own keys. One its turn could not
   * continue with is refused, and the interaction stays pending, rather than taken and left
   * waiting where nobody sees why. The state it read is the turn's, for its continuation.
   */
  private async checkContinuable(projectId: string, record: StoredInteraction): Promise<PausedState | undefined> {
    const state = (await this.store.pausedStates.get(projectId, record.turn_id)) as PausedState | undefined;
    if (!state) return undefined;
    try {
      await this.deps.turns.checkRunsWithoutSecrets(projectId, state.template);
    } catch (error) {
      if (!isAppError(error)) throw error;
      // A harness this server lacks is lacking however the answer comes; anything else may be a secret only the caller has.
      const next =
        error.type === 'harness-unavailable'
          ? 'Answer it through a server that runs the harness: the interaction stays pending'
          : "Answered that way, a turn goes on with the server's own keys, not the secrets of the request that paused it (those are never stored): " +
            'answer it in band instead (re-post the conversation with the decision and its secrets), or give the server what it lacks';
      throw new AppError(error.type, `interaction "${record.id}" cannot be answered through the API, because its turn could not go on: ${error.message}. ${next}`, { status: error.status });
    }
    return state;
  }

  /**
   * One continuation of a paused turn at a time in this process: an answer that comes while one
   * runs (it may have looked before this answer was stored) is looked at once that one has ended.
   */
  private continueInBackground(projectId: string, turnId: string, state: PausedState | undefined): void {
    if (this.stopping.signal.aborted) return;
    const work: Promise<void> = (this.continuing.get(turnId) ?? Promise.resolve())
      .then(() => continuePausedTurn(this.deps, projectId, turnId, state, this.stopping.signal))
      .catch((error: unknown) => this.deps.log.warn({ err: error, turn_id: turnId }, 'could not continue a paused turn'))
      .finally(() => {
        if (this.continuing.get(turnId) === work) this.continuing.delete(turnId);
      });
    this.continuing.set(turnId, work);
  }

  /** At start: answers given while no process could continue them (a crash, a restart) are picked up, each in the background. */
  async resumeAnswered(): Promise<number> {
    const turns = await answeredWhileDown(this.store);
    for (const [turnId, projectId] of turns) this.continueInBackground(projectId, turnId, undefined);
    if (turns.size) this.deps.log.info({ turns: turns.size }, 'continuing turns answered while the server was down');
    return turns.size;
  }

  /** No continuation starts or tries again from now on; resolves once those under way have stopped. */
  async close(): Promise<void> {
    this.stopping.abort();
    await Promise.all(this.continuing.values());
  }
}
