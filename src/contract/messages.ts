import { z } from 'zod';

/**
 * Messages in the service's native representation (spec §2.5).
 *
 * A turn folds into: a tool-call message `{role: "tool", content: "", tool_call_id, tool_name,
 * input}`, its tool-result message `{role: "tool", content, tool_call_id, is_error}`, and the final
 * assistant message. A paused call carries `approval: {id}`; the caller answers in band by
 * re-posting it with `approval: {id, approved, reason?}` (design.md §4).
 */

export const Approval = z.object({
  id: z.string().min(1),
  approved: z.boolean().optional(),
  reason: z.string().optional(),
});
export type Approval = z.infer<typeof Approval>;

/**
 * Whether a value can be a tool call's arguments. Every model API takes them as an object: anything
 * else would fail at the model, later and less clearly.
 */
export function isToolInput(value: unknown): boolean {
  return value === null || (typeof value === 'object' && !Array.isArray(value));
}

export const TOOL_INPUT_ERROR = "a tool call's input must be an object of its arguments";

export const ToolInput = z.unknown().refine(isToolInput, { error: TOOL_INPUT_ERROR });

export const TextPart = z.looseObject({ type: z.literal('text'), text: z.string() });

export const Message = z.looseObject({
  id: z.string().optional(),
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  content: z
    .union([z.string(), z.array(TextPart)], {
      // Other content blocks (a tool call, a decision) are other messages or fields here; say which.
      error:
        'content must be text or an array of {"type": "text", "text": …} parts (a user message\'s may also hold files, ' +
        '{"type": "file", "url": "data:…", "mediaType"?, "filename"?}); a tool call is a message of its own ' +
        '(tool_call_id, tool_name, input), and an approval decision goes on it as approval: {id, approved, reason?}',
    })
    .nullish()
    .transform((c) => (Array.isArray(c) ? c.map((p) => p.text).join('') : (c ?? ''))),
  tool_call_id: z.string().min(1).optional(),
  tool_name: z.string().min(1).optional(),
  // An object, checked where the call is paired with its result (collectCalls): a call that failed
  // because the model's arguments were not an object keeps them, as the turn's output showed them.
  input: z.unknown().optional(),
  is_error: z.boolean().optional(),
  approval: Approval.optional(),
});
export type Message = z.output<typeof Message>;

/**
 * The Vercel AI SDK `UIMessage` (reference/vercel-ai-sdk.md §2). Part shapes are checked when the
 * message is converted, where the error can name the exact part.
 */
const UIMessagePart = z.looseObject({ type: z.string().min(1) });
export const UIMessage = z.looseObject({
  /** The SDK always sets one; a hand-written conversation may leave it out. */
  id: z.string().optional(),
  role: z.enum(['system', 'user', 'assistant']),
  metadata: z.unknown().optional(),
  parts: z.array(UIMessagePart),
});
export type UIMessage = z.infer<typeof UIMessage>;

/**
 * A file attached to a user message: a Vercel `file` part as `useChat`'s `sendMessage({files})`
 * makes it, and the same object as a block of a native user message's content. `url` is a `data:`
 * URL (agentd fetches no other); the file goes into the session folder (docs/api.md).
 */
export const FilePart = z.looseObject({
  type: z.literal('file'),
  url: z.string(),
  mediaType: z.string().optional(),
  filename: z.string().optional(),
});
export type FilePart = z.infer<typeof FilePart>;

/**
 * The reference implementation's content blocks (reference/agenta-agent-service.md §3), which an
 * inbound assistant message may hold so a client written for it can answer a pause in band
 * (src/stream/blocks-to-native.ts reads them with these schemas).
 */
export const ToolCallBlock = z.looseObject({
  type: z.literal('tool_call'),
  toolCallId: z.string().min(1),
  toolName: z.string().min(1),
  input: z.unknown().optional(),
});

/** A decision on a paused call, as a `tool_result` block's `output`. */
export const Decision = z.looseObject({
  approved: z.boolean(),
  interactionToken: z.string({ error: 'a decision needs interactionToken: the pending_interaction.id of the pause it answers' }).min(1),
  reason: z.string().optional(),
  // The reference's respond operation calls the reason `message`.
  message: z.string().optional(),
});

export const ToolResultBlock = z.looseObject({
  type: z.literal('tool_result'),
  toolCallId: z.string().min(1),
  output: z.unknown().optional().meta({
    description: "The call's result (a client tool's); or, when it has `approved`, the decision on the paused call: {approved, interactionToken, reason?}",
  }),
  isError: z.boolean().optional(),
});

/**
 * A native message as a request may send it: a Message, a user message whose content holds files,
 * or an assistant message whose content holds its calls and the caller's decisions. The document
 * names them; nativeMessages reads each block with the block's own schema, where an error can
 * name the block.
 */
export const InboundMessage = z.union([
  Message,
  Message.extend({ role: z.literal('user'), content: z.array(z.union([TextPart, FilePart])) }),
  Message.extend({ role: z.literal('assistant'), content: z.array(z.union([TextPart, ToolCallBlock, ToolResultBlock, FilePart])) }),
]);

export const MessagesFormat = z.enum(['native', 'vercel']);
export type MessagesFormat = z.infer<typeof MessagesFormat>;
