import type { PendingInteraction } from '../contract/events.ts';
import type { SessionView, TurnView } from '../contract/sessions.ts';
import type { Lease } from '../store/leases.ts';
import type { SessionRecord } from '../store/sessions.ts';
import type { TurnRecord } from '../store/turns.ts';

/**
 * Projections of stored session records onto the sessions API's contract. Stored nulls become
 * absent fields, as every reply leaves nulls out (spec §2.6).
 */

export function toTurnView(turn: TurnRecord): TurnView {
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

/** A lease names the live turn only until it expires: past that its holder is gone. */
export function liveTurnOf(lease: Lease | undefined, now = Date.now()): SessionView['live_turn'] {
  return lease && Date.parse(lease.expires_at) > now ? { id: lease.turn_id, started_at: lease.started_at } : undefined;
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
