import { randomUUID } from 'node:crypto';
import type { UIMessage } from 'ai';
import { doneEvent, type AgentEvent } from '../contract/events.ts';
import type { ErrorType } from '../contract/errors.ts';
import { AppError } from '../errors.ts';
import type { LeasesRepo } from '../store/leases.ts';
import type { TurnsRepo } from '../store/turns.ts';
import type { Notifications } from '../store/notifications.ts';
import { TurnFolder } from '../stream/fold.ts';
import { endedTurn, ranRevision } from './ended-turn.ts';
import { LiveTurn } from './live-turn.ts';

/**
 * Attach across replicas (design.md §5): a turn's events live in the process that runs it, so a
 * replica asked to attach sends a follow request naming the turn and a reply channel of its own;
 * the process running the turn answers on that channel with the turn's ids, every event from the
 * first (the replay), the live ones as they come, and the end. The follower rebuilds the turn
 * from them as a LiveTurn, so the HTTP layer serves it like a local one.
 */

const FOLLOW = 'follow';
/** How long a follower waits for the record of a turn whose lease it found. */
const RECORD_WAIT_MS = 500;

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
  // A follower builds the turn from its record and only needs to know it was heard; the ids and the
  // continued message stay in the hello for followers of the version before, during an upgrade.
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
  turns: TurnsRepo;
  /** How long the running process has to answer, and how often the turn's lease is checked. */
  leaseTtlMs: number;
}

/**
 * Follows a turn that runs in another process: at once, from the turn's record (its ids, the
 * message it continues, its revision), so the follower's stream starts before the running process
 * has answered; the relay then feeds it. Undefined when the record says the turn is not running.
 * When the process never answers, or the turn's lease goes without an end arriving (its process
 * died), the turn ends with an error and `interrupted` on the follower's stream, as a turn that
 * failed here would end; a turn that ended normally meanwhile is told from its record.
 */
export async function followRemoteTurn(notifications: Notifications, options: FollowOptions): Promise<LiveTurn | undefined> {
  const { projectId, sessionId, turnId, leases, turns, leaseTtlMs } = options;
  let record = await turns.get(projectId, turnId);
  // A turn takes its lease a moment before it writes its record.
  for (let wait = 0; !record && wait < RECORD_WAIT_MS; wait += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    record = await turns.get(projectId, turnId);
  }
  if (!record || record.session_id !== sessionId || record.status !== 'running') return undefined;
  const turn = new LiveTurn({
    id: turnId,
    projectId,
    sessionId,
    traceId: record.trace_id,
    spanId: record.span_id,
    continues: record.request?.continues as UIMessage | undefined,
    revision: ranRevision(record),
    relayed: true,
  });
  const reply = `reply_${randomUUID().replaceAll('-', '')}`;
  const folder = new TurnFolder();
  let answered = false;
  let received = 0;
  const push = (event: AgentEvent) => {
    folder.push(event);
    turn.push(event);
  };
  const end = (failure: Failure | undefined) => {
    if (turn.isFinished) return;
    if (failure) turn.failure = new AppError(failure.type, failure.message, { status: failure.status, ...(failure.headers ? { headers: failure.headers } : {}) });
    turn.finish(folder.result());
  };
  /** Ends the followed turn with an error frame, as a turn that failed here would end. */
  const lose = (why: string) => {
    if (turn.isFinished) return;
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
    if (turn.isFinished) return;
    if (message.t === 'hello') {
      answered = true;
    } else if (message.t === 'events') {
      // A listening connection that dropped and came back missed what was sent meanwhile.
      if (message.from !== received) return lose('part of the relayed turn was lost on the way');
      for (const event of message.events) push(event);
      received += message.events.length;
    } else if (message.t === 'end') {
      if (message.events !== received) return lose('the end of the relayed turn was lost on the way');
      end(message.failure);
    }
  });

  /** The turn's lease is gone and no end came: it ended meanwhile (its record says how), or its process died. */
  const gone = async () => {
    const now = await turns.get(projectId, turnId).catch(() => undefined);
    if (!answered && received === 0 && now && now.status !== 'running') {
      const ended = endedTurn(now);
      for await (const event of ended.follow()) push(event);
      if (ended.failure) turn.failure = ended.failure;
      return end(undefined);
    }
    lose('the agentd process running the turn stopped before the turn ended');
  };
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
    if (++goneChecks === 2) await gone();
  };
  const watch = setInterval(() => void checkLease(), interval);
  watch.unref();
  const silence = setTimeout(() => {
    if (!answered) lose(`the agentd process running the turn did not answer within ${leaseTtlMs} ms`);
  }, leaseTtlMs);
  const stop = () => {
    clearInterval(watch);
    clearTimeout(silence);
    void stopListening();
  };
  void turn.done.finally(stop);

  try {
    await notifications.send(FOLLOW, JSON.stringify({ turn_id: turnId, project_id: projectId, session_id: sessionId, reply } satisfies FollowRequest));
  } catch (error) {
    stop();
    throw error;
  }
  return turn;
}
