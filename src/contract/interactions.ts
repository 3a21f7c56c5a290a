import { z } from 'zod';
import { InteractionKind } from './events.ts';
import { SessionId } from './invoke.ts';

/** Interaction records and the interactions API (spec §2.7, §3.1, §4.4; design.md §4). */

export const InteractionStatus = z.enum(['pending', 'responded', 'resolved', 'cancelled']);
export type InteractionStatus = z.infer<typeof InteractionStatus>;

const record = z.record(z.string(), z.unknown());

export const InteractionRecord = z.object({
  id: z.string(),
  project_id: z.string(),
  session_id: z.string(),
  turn_id: z.string(),
  kind: InteractionKind,
  status: InteractionStatus,
  request: z.object({ tool: z.string(), args: z.unknown(), tool_call_id: z.string() }),
  answer: record.optional(),
  resolution: record.optional(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type InteractionRecord = z.infer<typeof InteractionRecord>;

export const Paging = {
  limit: z.number().int().min(1).max(200).optional(),
  cursor: z.string().min(1).optional(),
};

export const InteractionQuery = z.strictObject({
  session_id: SessionId.optional(),
  turn_id: z.string().min(1).optional(),
  kind: InteractionKind.optional(),
  status: z.union([InteractionStatus, z.array(InteractionStatus).min(1)]).optional(),
  ...Paging,
});
export type InteractionQuery = z.infer<typeof InteractionQuery>;

export const InteractionList = z.object({
  count: z.number().int(),
  interactions: z.array(InteractionRecord),
  next: z.string().optional(),
});

/** An approval's answer (`user_approval`). */
export const ApprovalAnswer = z.strictObject({ approved: z.boolean(), reason: z.string().max(4096).optional() });
/** A client tool's answer (`client_tool`): its output, or the error it failed with. */
export const ClientToolAnswer = z.union([z.strictObject({ output: z.unknown() }), z.strictObject({ error: z.string() })]);
/** `user_input` answers are free-form objects. */
export const InputAnswer = record;

export const RespondBody = z.strictObject({ answer: record });

export const TransitionBody = z.strictObject({
  interaction_id: z.string().min(1),
  status: InteractionStatus,
  resolution: record.optional(),
});
