import type { InteractionStatus } from '../contract/interactions.ts';

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

/** The 409 message for answering interaction `id`, which is `status` and no longer pending. */
export function lateAnswer(id: string, status: InteractionStatus | undefined, where = ''): string {
  const next = status && NEXT_STEP[status];
  return `interaction "${id}" is ${status ?? 'gone'}, not pending; it cannot be answered${where}${next ? `; ${next}` : ''}`;
}
