import { randomUUID } from 'node:crypto';
import type { UIMessage } from 'ai';
import { doneEvent, type AgentEvent } from '../contract/events.ts';
import type { ErrorType } from '../contract/errors.ts';
import { AppError } from '../errors.ts';
import type { LeasesRepo } from '../store/leases.ts';
import type { Notifications } from '../store/notifications.ts';
import { TurnFolder } from '../stream/fold.ts';
import { LiveTurn } from './live-turn.ts';

/**
 * Attach across replicas (design.md §5): a turn's events live in the process that runs it, so a
 * replica asked to attach sends a follow request naming the turn and a reply channel of its own;
 * the process running the turn answers on that channel with the turn's ids, every event from the
 * first (the replay), the live ones as they come, and the end. The follower rebuilds the turn
 * from them as a LiveTurn, so the HTTP layer serves it like a local one.
 */

const FOLLOW = 'follow';

type FollowRequest = { turn_id: string; project_id: string; session_id: string; reply: string };
type Failure = { type: ErrorType; status: number; message: string; headers?: Record<string, string> };
type RelayMessage =
  | { t: 'hello'; trace_id: string; span_id: string; continues?: UIMessage }
  | { t: 'events'; from: number; events: AgentEvent[] }
  | { t: 'end'; events: number; failure?: Failure };

/**
 * Answers the follow requests of other replicas for the turns `find` knows (this process's live
 * ones). Resolves to the way to stop answering new requests; relays under way run to their turn's end.
 */
export function answerFollowers(
  notifications: Notifications,
  find: (turnId: string) => LiveTurn | undefined,
  log: { warn(obj: object, msg: string): void },
): Promise<() => Promise<void>> {
  return notifications.listen(FOLLOW, (message) => {
    let request: FollowRequest;
    try {
      request = JSON.parse(message) as FollowRequest;
    } catch {
      return;
    }
    const turn = find(request.turn_id);
    if (!turn || turn.projectId !== request.project_id || turn.sessionId !== request.session_id) return;
    relay(notifications, turn, request.reply).catch((error: unknown) => log.warn({ err: error, turn_id: turn.id }, 'could not relay a turn to another replica'));
  });
}

/** Sends the turn to one follower; events that pile up while a send is under way go out together. */
async function relay(notifications: Notifications, turn: LiveTurn, channel: string): Promise<void> {
  const send = (message: RelayMessage) => notifications.send(channel, JSON.stringify(message));
  await send({ t: 'hello', trace_id: turn.traceId, span_id: turn.spanId, ...(turn.continues ? { continues: turn.continues } : {}) });
  const queued: AgentEvent[] = [];
  let sent = 0;
  let sending: Promise<void> | undefined;
  const flush = async () => {
    while (queued.length) {
      const events = queued.splice(0);
      await send({ t: 'events', from: sent, events });
      sent += events.length;
    }
    sending = undefined;
  };
  for await (const event of turn.follow()) {
    queued.push(event);
    sending ??= flush();
  }
  await sending;
  const failure = turn.failure;
  await send({
    t: 'end',
    events: sent,
    ...(failure ? { failure: { type: failure.type, status: failure.status, message: failure.message, ...(failure.headers ? { headers: failure.headers } : {}) } } : {}),
  });
}

export interface FollowOptions {
  projectId: string;
  sessionId: string;
  turnId: string;
  leases: LeasesRepo;
  /** How long the running process has to answer, and how often the turn's lease is checked. */
  leaseTtlMs: number;
}

/**
 * Follows a turn that runs in another process. Resolves once that process answers, to a LiveTurn
 * fed by the relay; rejects (409) when nobody answers within the lease's lifetime. When the turn's
 * lease goes (its process died or finished) and the end never arrives, the turn ends with an error
 * rather than leave its reader waiting.
 */
export async function followRemoteTurn(notifications: Notifications, options: FollowOptions): Promise<LiveTurn> {
  const { projectId, sessionId, turnId, leases, leaseTtlMs } = options;
  const reply = `reply_${randomUUID().replaceAll('-', '')}`;
  const folder = new TurnFolder();
  let turn: LiveTurn | undefined;
  let settle!: (outcome: LiveTurn | AppError) => void;
  const answer = new Promise<LiveTurn | AppError>((resolve) => (settle = resolve));

  let received = 0;
  const push = (event: AgentEvent) => {
    folder.push(event);
    turn!.push(event);
  };
  const end = (failure: Failure | undefined) => {
    if (!turn || turn.isFinished) return;
    if (failure) turn.failure = new AppError(failure.type, failure.message, { status: failure.status, ...(failure.headers ? { headers: failure.headers } : {}) });
    turn.finish(folder.result());
  };
  /** Ends the followed turn with an error frame, as a turn that failed here would end. */
  const lose = (why: string) => {
    const message = `${why}; the session's turn history has what was recorded for turn "${turnId}"`;
    push({ type: 'error', data: { code: 503, type: 'unavailable', message } });
    push(doneEvent('interrupted'));
    end({ type: 'unavailable', status: 503, message });
  };

  const stopListening = await notifications.listen(reply, (raw) => {
    let message: RelayMessage;
    try {
      message = JSON.parse(raw) as RelayMessage;
    } catch {
      return;
    }
    if (turn?.isFinished) return;
    if (message.t === 'hello') {
      turn ??= new LiveTurn({ id: turnId, projectId, sessionId, traceId: message.trace_id, spanId: message.span_id, continues: message.continues });
      settle(turn);
    } else if (turn && message.t === 'events') {
      // A listening connection that dropped and came back missed what was sent meanwhile.
      if (message.from !== received) return lose('part of the relayed turn was lost on the way');
      for (const event of message.events) push(event);
      received += message.events.length;
    } else if (message.t === 'end') {
      if (message.events !== received) return lose('the end of the relayed turn was lost on the way');
      end(message.failure);
    }
  });

  // The lease says whether the turn still runs somewhere. The end is sent after the lease is
  // released, so a lease that is gone gets one more check before the turn counts as lost.
  const interval = Math.min(leaseTtlMs / 3, 1_000);
  // Counted in checks, not time: timers drift, and a check that came a moment early must not
  // leave the question to the silence timeout.
  let goneChecks = 0;
  const checkLease = async () => {
    const lease = await leases.get(projectId, sessionId).catch(() => 'unknown' as const);
    if (lease === 'unknown') return;
    if (lease && lease.turn_id === turnId && lease.live) {
      goneChecks = 0;
      return;
    }
    if (++goneChecks < 2) return;
    if (!turn) {
      settle(new AppError('not-found', `session "${sessionId}" has no live turn to attach to; send data.inputs.messages to start one`));
      return;
    }
    lose('the agentd process running the turn stopped before the turn ended');
  };
  const watch = setInterval(() => void checkLease(), interval);
  watch.unref();
  const silence = setTimeout(
    () => settle(new AppError('session-busy', `session "${sessionId}" runs turn "${turnId}" in another agentd process, which did not answer; try again, or send input with force to take over`)),
    leaseTtlMs,
  );
  const stop = () => {
    clearInterval(watch);
    clearTimeout(silence);
    void stopListening();
  };

  try {
    await notifications.send(FOLLOW, JSON.stringify({ turn_id: turnId, project_id: projectId, session_id: sessionId, reply } satisfies FollowRequest));
  } catch (error) {
    stop();
    throw error;
  }
  const outcome = await answer;
  clearTimeout(silence);
  if (outcome instanceof AppError) {
    stop();
    throw outcome;
  }
  void outcome.done.finally(stop);
  return outcome;
}
