import { z } from 'zod';
import { StopReason, Usage, PendingInteraction } from './events.ts';

/** The sessions API: reading a session and its turns (issue 3; design.md §4). */

export const TurnStatus = z.enum(['running', 'completed', 'paused', 'failed', 'interrupted', 'cancelled']);
export type TurnStatus = z.infer<typeof TurnStatus>;

export const TurnView = z.object({
  id: z.string(),
  status: TurnStatus,
  stop_reason: StopReason.optional(),
  trace_id: z.string(),
  span_id: z.string(),
  started_at: z.string(),
  ended_at: z.string().optional(),
  outputs: z
    .object({ messages: z.array(z.unknown()), pending_interaction: PendingInteraction.optional() })
    .optional(),
  usage: Usage.optional(),
  error: z.object({ code: z.number().int(), type: z.string().optional(), message: z.string() }).optional(),
  request: z.record(z.string(), z.unknown()).optional(),
});
export type TurnView = z.infer<typeof TurnView>;

export const SessionView = z.object({
  session: z.object({ id: z.string(), project_id: z.string(), created_at: z.string(), updated_at: z.string() }),
  live_turn: z.object({ id: z.string(), started_at: z.string() }).optional(),
  turns: z.array(TurnView),
  next: z.string().optional(),
});
export type SessionView = z.infer<typeof SessionView>;

/**
 * Evaluation cases run each attempt in a session of its own, named with this prefix; listings of
 * the project's sessions leave them out (a run's results name them).
 */
export const EVALUATION_SESSION_PREFIX = 'eval:';

/** One session in a listing: when it was made and last used, and what it needs now. */
export const SessionSummary = z.object({
  id: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  /** The turn holding the session now. */
  live_turn: z.object({ id: z.string(), started_at: z.string() }).optional(),
  /** Interactions waiting for an answer. */
  pending_interactions: z.number().int().nonnegative(),
  last_turn: z
    .object({ id: z.string(), status: TurnStatus, stop_reason: StopReason.optional(), started_at: z.string(), ended_at: z.string().optional(), usage: Usage.optional() })
    .optional(),
});
export type SessionSummary = z.infer<typeof SessionSummary>;

export const SessionList = z.object({ count: z.number().int(), sessions: z.array(SessionSummary), next: z.string().optional() });
export type SessionList = z.infer<typeof SessionList>;

/** The turn a stop request stopped (or, run by another replica, asked to stop). */
export const SessionStopped = z.object({ turn_id: z.string() });
export type SessionStopped = z.infer<typeof SessionStopped>;

export const SessionListStatus = z.enum(['pending', 'live']);

export const FileEntry = z.object({ name: z.string(), type: z.enum(['file', 'directory']), size: z.number().int().optional() });
export type FileEntry = z.infer<typeof FileEntry>;
export const FileListing = z.object({ path: z.string(), entries: z.array(FileEntry) });
export type FileListing = z.infer<typeof FileListing>;

/** The reply to an upload into the session folder: where the file landed (folder-relative) and its size. */
export const FileUploaded = z.object({ path: z.string(), size: z.number().int().nonnegative() });
export type FileUploaded = z.infer<typeof FileUploaded>;
