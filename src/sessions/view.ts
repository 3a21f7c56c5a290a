import type { PendingInteraction } from '../contract/events.ts';
import type { SessionList, SessionSummary, SessionView, TurnView } from '../contract/sessions.ts';
import type { Page } from '../store/cursor.ts';
import type { Store } from '../store/db.ts';
import type { Lease } from '../store/leases.ts';
import type { SessionRecord } from '../store/sessions.ts';
import type { TurnRecord } from '../store/turns.ts';

/**
 * Projections of stored session records onto the sessions API's contract. Stored nulls become
 * absent fields, as every reply leaves nulls out (spec §2.6).
 */

function toTurnView(turn: TurnRecord): TurnView {
  const view: TurnView = {
    id: turn.id,
    status: turn.status,
    trace_id: turn.trace_id,
    span_id: turn.span_id,
    started_at: turn.started_at,
  };
  if (turn.stop_reason !== null) view.stop_reason = turn.stop_reason;
  if (turn.ended_at !== null) view.ended_at = turn.ended_at;
  if (turn.output !== null) {
    const { messages, pending_interaction } = turn.output as { messages?: unknown[]; pending_interaction?: PendingInteraction };
    view.outputs = { messages: messages ?? [], ...(pending_interaction ? { pending_interaction } : {}) };
  }
  if (turn.usage !== null) view.usage = turn.usage;
  if (turn.error !== null) view.error = turn.error as NonNullable<TurnView['error']>;
  if (turn.request !== null) view.request = turn.request;
  return view;
}

/** A lease names the live turn only until it expires (by the database's clock): past that its holder is gone. */
function liveTurnOf(lease: Lease | undefined): SessionView['live_turn'] {
  return lease?.live ? { id: lease.turn_id, started_at: lease.started_at } : undefined;
}

export function toSessionView(session: SessionRecord, lease: Lease | undefined, turns: TurnRecord[], next: string | undefined): SessionView {
  const live = liveTurnOf(lease);
  return {
    session: { id: session.id, project_id: session.project_id, created_at: session.created_at, updated_at: session.updated_at },
    ...(live ? { live_turn: live } : {}),
    turns: turns.map(toTurnView),
    ...(next !== undefined ? { next } : {}),
  };
}

/** A page of sessions as the listing shows them: each with its live turn, pending answers and latest turn. */
export async function toSessionList(store: Store, projectId: string, page: Page<SessionRecord>): Promise<SessionList> {
  const ids = page.items.map((session) => session.id);
  const [leases, pending, latest] = await Promise.all([
    store.leases.ofSessions(projectId, ids),
    store.interactions.pendingCounts(projectId, ids),
    store.turns.latestOf(projectId, ids),
  ]);
  const leaseOf = new Map(leases.map((lease) => [lease.session_id, lease]));
  const sessions = page.items.map((session): SessionSummary => {
    const live = liveTurnOf(leaseOf.get(session.id));
    const last = latest.get(session.id);
    return {
      id: session.id,
      created_at: session.created_at,
      updated_at: session.updated_at,
      ...(live ? { live_turn: live } : {}),
      pending_interactions: pending.get(session.id) ?? 0,
      ...(last
        ? {
            last_turn: {
              id: last.id,
              status: last.status,
              ...(last.stop_reason !== null ? { stop_reason: last.stop_reason } : {}),
              started_at: last.started_at,
              ...(last.ended_at !== null ? { ended_at: last.ended_at } : {}),
              ...(last.usage !== null ? { usage: last.usage } : {}),
            },
          }
        : {}),
    };
  });
  return { count: sessions.length, sessions, ...(page.next !== undefined ? { next: page.next } : {}) };
}
