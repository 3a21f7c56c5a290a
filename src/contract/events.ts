import { z } from 'zod';

/**
 * The native event vocabulary of a turn (design.md §4). A turn is one ordered stream of these;
 * every output format (JSON fold, native SSE/NDJSON, the Vercel UI message stream) is a
 * projection of it. On the wire a native frame is exactly `{type, data}`.
 */

export const StopReason = z.enum(['end_turn', 'paused', 'max_steps', 'max_tokens', 'error', 'cancelled', 'interrupted']);
export type StopReason = z.infer<typeof StopReason>;

export const InteractionKind = z.enum(['user_approval', 'user_input', 'client_tool']);
export type InteractionKind = z.infer<typeof InteractionKind>;

export const PendingInteraction = z.object({
  id: z.string(),
  kind: InteractionKind,
  tool: z.string(),
  payload: z.object({
    tool_call_id: z.string(),
    tool_name: z.string(),
    input: z.unknown(),
    /** The reference's names for the same call, which its clients read (`payload.toolCallId`, `payload.toolCall`). */
    toolCallId: z.string(),
    toolName: z.string(),
    toolCall: z.object({ toolCallId: z.string(), name: z.string(), title: z.string(), rawInput: z.unknown(), kind: z.literal('client').optional() }),
  }),
});
export type PendingInteraction = z.infer<typeof PendingInteraction>;

/** An interaction a turn asks for on one tool call, under agentd's names and the reference's. */
export function pendingInteraction(id: string, kind: InteractionKind, call: { toolCallId: string; toolName: string; input: unknown }): PendingInteraction {
  const { toolCallId, toolName, input } = call;
  return {
    id,
    kind,
    tool: toolName,
    payload: {
      tool_call_id: toolCallId,
      tool_name: toolName,
      input,
      toolCallId,
      toolName,
      toolCall: { toolCallId, name: toolName, title: toolName, rawInput: input, ...(kind === 'client_tool' ? { kind: 'client' as const } : {}) },
    },
  };
}

export const Usage = z.object({
  input: z.number().int().nonnegative(),
  output: z.number().int().nonnegative(),
  total: z.number().int().nonnegative(),
  cost: z.number().nonnegative().optional(),
});
export type Usage = z.infer<typeof Usage>;

/** The stored revision a turn ran, when its request named one by references. */
export const RanRevision = z.object({ id: z.string(), slug: z.string(), version: z.number().int(), workflow: z.string(), variant: z.string() });
export type RanRevision = z.infer<typeof RanRevision>;

const id = z.object({ id: z.string() });
const delta = z.object({ id: z.string(), delta: z.string() });

export const AgentEvent = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('turn_start'),
    data: z.object({ turn_id: z.string(), session_id: z.string(), trace_id: z.string(), revision: RanRevision.optional() }),
  }),
  z.object({ type: z.literal('message_start'), data: id }),
  z.object({ type: z.literal('message_delta'), data: delta }),
  z.object({ type: z.literal('message_end'), data: id }),
  z.object({ type: z.literal('thought_start'), data: id }),
  z.object({ type: z.literal('thought_delta'), data: delta }),
  z.object({ type: z.literal('thought_end'), data: id }),
  z.object({
    type: z.literal('tool_call'),
    data: z.object({ id: z.string(), name: z.string(), input: z.unknown() }),
  }),
  z.object({
    type: z.literal('tool_result'),
    data: z.object({
      id: z.string(),
      output: z.unknown(),
      is_error: z.boolean(),
      denied: z.boolean().optional(),
    }),
  }),
  z.object({ type: z.literal('interaction_request'), data: PendingInteraction }),
  z.object({ type: z.literal('usage'), data: Usage }),
  z.object({
    type: z.literal('error'),
    data: z.object({ code: z.number().int(), type: z.string().optional(), message: z.string() }),
  }),
  z.object({
    type: z.literal('done'),
    /** `stopReason` repeats `stop_reason` under the name the reference's clients read. */
    data: z.object({ stop_reason: StopReason, stopReason: StopReason, pending_interaction: PendingInteraction.optional() }),
  }),
]);
export type AgentEvent = z.infer<typeof AgentEvent>;
type AgentEventType = AgentEvent['type'];
export type EventOf<T extends AgentEventType> = Extract<AgentEvent, { type: T }>;

/** A turn's last event. */
export function doneEvent(stopReason: StopReason, pending?: PendingInteraction): EventOf<'done'> {
  return { type: 'done', data: { stop_reason: stopReason, stopReason, ...(pending ? { pending_interaction: pending } : {}) } };
}
