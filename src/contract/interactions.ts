import { z } from 'zod';
import { InteractionKind } from './events.ts';
import { withExample } from './example.ts';
import { SessionId } from './invoke.ts';

/** Interaction records and the interactions API (spec §2.7, §3.1, §4.4; design.md §4). */

export const InteractionStatus = z.enum(['pending', 'responded', 'resolved', 'cancelled']);
export type InteractionStatus = z.infer<typeof InteractionStatus>;

const record = z.record(z.string(), z.unknown());

const InteractionRequest = z.object({ tool: z.string(), args: z.unknown(), tool_call_id: z.string() });

export const InteractionRecord = z.object({
  id: z.string(),
  project_id: z.string(),
  session_id: z.string(),
  turn_id: z.string(),
  kind: InteractionKind,
  status: InteractionStatus,
  request: InteractionRequest,
  answer: record.optional(),
  resolution: record.optional(),
  /** The reference's names: the gate token (the id itself here), and the request and resolution under `data`. */
  token: z.string(),
  data: z.object({ request: InteractionRequest, resolution: record.optional() }),
  created_at: z.string(),
  updated_at: z.string(),
});
export type InteractionRecord = z.infer<typeof InteractionRecord>;

/** One record as a reply: its fields, and the reference's `{count, interaction}` wrapping of it, so clients written for either read it. */
export const InteractionReply = InteractionRecord.extend({ count: z.literal(1), interaction: InteractionRecord });
export type InteractionReply = z.infer<typeof InteractionReply>;

export const Paging = {
  limit: z.number().int().min(1).max(200).optional(),
  cursor: z.string().min(1).optional(),
};

const InteractionFilters = {
  session_id: SessionId.optional(),
  turn_id: z.string().min(1).optional(),
  kind: InteractionKind.optional(),
  status: z.union([InteractionStatus, z.array(InteractionStatus).min(1)]).optional(),
};

/** A creation time bound, kept as the store writes times so that they compare as text. */
const Instant = z.iso.datetime({ offset: true }).transform((at) => new Date(at).toISOString());

/**
 * Which end of the list comes first (`ascending`, the default, is oldest first), and the window of
 * creation times kept, both bounds included: the reference's windowing.
 */
const Window = {
  order: z.enum(['ascending', 'descending']).optional(),
  newest: Instant.optional(),
  oldest: Instant.optional(),
};

export const InteractionQuery = z.strictObject({ ...InteractionFilters, ...Paging, ...Window });
export type InteractionQuery = z.infer<typeof InteractionQuery>;

/**
 * The reference's form of the same query: the filters under `query`, paging and the window under
 * `windowing` (whose `next` is our cursor). `actionable_only` keeps the records still waiting for
 * an answer.
 */
export const WindowedInteractionQuery = z
  .strictObject({
    query: z.strictObject({ ...InteractionFilters, actionable_only: z.boolean().optional() }).optional(),
    windowing: z.strictObject({ limit: Paging.limit, next: Paging.cursor, ...Window }).optional(),
  })
  .transform(({ query = {}, windowing = {} }): InteractionQuery => {
    const { actionable_only, ...filters } = query;
    const { next, ...window } = windowing;
    const statuses = typeof filters.status === 'string' ? [filters.status] : (filters.status ?? InteractionStatus.options);
    return {
      ...filters,
      ...(actionable_only ? { status: statuses.filter((s) => s === 'pending') } : {}),
      ...window,
      ...(next !== undefined ? { cursor: next } : {}),
    };
  });

/** The list's query in either form. */
export const InteractionListQuery = withExample(z.union([InteractionQuery, WindowedInteractionQuery]), { session_id: 'chat-42', status: 'pending', limit: 20 });

/** Which of the two query forms a body is written in. */
export const isWindowedQuery = (body: unknown): boolean => typeof body === 'object' && body !== null && ('query' in body || 'windowing' in body);

export const InteractionList = z.object({
  count: z.number().int(),
  interactions: z.array(InteractionRecord),
  next: z.string().optional(),
});

/**
 * An approval's answer (`user_approval`). The reference's clients send `{approved, tool_call_id?,
 * message?}`: `message` is taken as the reason, and `tool_call_id` must name the gated call.
 */
export const ApprovalAnswer = z.strictObject({
  approved: z.boolean(),
  reason: z.string().max(4096).optional(),
  message: z.string().max(4096).optional(),
  tool_call_id: z.string().min(1).optional(),
});
export type ApprovalAnswer = z.infer<typeof ApprovalAnswer>;
/** The reference's resolution of an approval, which its clients send to `/transition`. */
export const ApprovalVerdict = z.strictObject({
  verdict: z.enum(['approved', 'denied']),
  tool_call_id: z.string().min(1).optional(),
  reason: z.string().max(4096).optional(),
  message: z.string().max(4096).optional(),
});
/** A client tool's answer (`client_tool`): its output, or the error it failed with. */
export const ClientToolAnswer = z.union([z.strictObject({ output: z.unknown() }), z.strictObject({ error: z.string() })]);
/** `user_input` answers are free-form objects. */
export const InputAnswer = record;

export const RespondBody = withExample(
  z.strictObject({
    answer: record.meta({
      description:
        'By the interaction\'s kind (else 400): user_approval {approved, reason?, message?, tool_call_id?} (tool_call_id, when given, the gated call\'s); client_tool {output} or {error}; user_input any object',
    }),
  }),
  { answer: { approved: true, reason: 'Writing haiku.txt is fine' } },
);

/**
 * The interaction is named by `interaction_id`, or as the reference's clients name it: `token` (the
 * paused turn's `pending_interaction.id`, which is the interaction's id) with its `session_id`.
 */
export const TransitionBody = withExample(
  z
    .strictObject({
      interaction_id: z.string().min(1).optional(),
      session_id: SessionId.optional(),
      token: z.string().min(1).optional(),
      status: InteractionStatus,
      resolution: record
        .meta({
          description:
            'Moving a pending interaction on: its answer, as respond takes it by kind (else 400); an approval\'s may also be the reference\'s {verdict: "approved"|"denied", tool_call_id?, reason?}',
        })
        .optional(),
    })
    .refine((b) => (b.interaction_id ?? b.token) !== undefined, { message: 'name the interaction with interaction_id (or token)', path: ['interaction_id'] })
    .refine((b) => b.interaction_id === undefined || b.token === undefined || b.interaction_id === b.token, { message: 'interaction_id and token name different interactions', path: ['token'] })
    // The refinements above, as the document says them.
    .meta({ anyOf: [{ required: ['interaction_id'] }, { required: ['token'] }] }),
  { interaction_id: '<interaction id>', status: 'resolved', resolution: { verdict: 'approved', reason: 'Writing haiku.txt is fine' } },
);
export type TransitionBody = z.infer<typeof TransitionBody>;
