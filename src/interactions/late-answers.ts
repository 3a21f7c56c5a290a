import type { InteractionStatus } from '../contract/interactions.ts';
import type { InteractionRecord } from '../store/interactions.ts';

/**
 * What a caller whose answer came too late can do instead, by the interaction's status now: a
 * refreshed page that cannot tell why its approval is refused is stuck (the reference
 * implementation's issue #6823).
 */
const NEXT_STEP: Partial<Record<InteractionStatus, string>> = {
  responded:
    'it was answered already and its turn continues: follow the session (GET /services/agent/v0/invoke/{session_id}/stream, or attach with x-ag-session-control: force)',
  resolved: "its answer was used: the session's turns hold the outcome (GET /api/sessions/{session_id})",
  cancelled: 'a newer turn of the session abandoned it: send a new message to go on',
};

/**
 * A cancel through the transition operation leaves a resolution on the record (the one it was
 * sent, else `{via: "transition"}`); a turn that abandons a pause leaves none; one cut off with
 * its turn leaves `{via: "interrupted"}`.
 */
const CANCELLED_THROUGH_API = 'it was cancelled through the API (POST /api/sessions/interactions/transition): send a new message to go on';

/** Left by a turn the server was stopped in (killed) before its pause was stored (store/turns.ts). */
const CANCELLED_WITH_ITS_TURN = 'its turn was interrupted (the server stopped) before it paused: send a new message to go on';

/** The 409 message for answering interaction `id`, which is no longer pending (`record` as it is now). */
export function lateAnswer(id: string, record: Pick<InteractionRecord, 'status' | 'resolution'> | undefined, where = ''): string {
  const status = record?.status;
  const cancelled = status === 'cancelled' ? record?.resolution : undefined;
  const next = cancelled ? (cancelled.via === 'interrupted' ? CANCELLED_WITH_ITS_TURN : CANCELLED_THROUGH_API) : status && NEXT_STEP[status];
  return `interaction "${id}" is ${status ?? 'gone'}, not pending; it cannot be answered${where}${next ? `; ${next}` : ''}`;
}
