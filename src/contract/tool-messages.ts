import type { Approval, Message } from './messages.ts';

/**
 * The native shape of a tool call and its result (spec §2.5): two `role: "tool"` messages sharing
 * `tool_call_id`. The fold, the Vercel conversion and the turn engine all build and recognise them
 * here, so the three cannot drift apart.
 */

export function toolCallMessage(toolCallId: string, toolName: string, input: unknown, approval?: Approval): Message {
  const message: Message = { role: 'tool', content: '', tool_call_id: toolCallId, tool_name: toolName, input };
  if (approval !== undefined) message.approval = { ...approval };
  return message;
}

export function toolResultMessage(toolCallId: string, content: string, isError: boolean): Message {
  return { role: 'tool', content, tool_call_id: toolCallId, is_error: isError };
}

/**
 * A call carries the tool's name and input; a result names neither (a client-supplied result may
 * omit `is_error`). `role: "assistant"` is accepted for calls posted by clients that keep calls on
 * the assistant's side.
 */
export function isToolCallMessage(message: Message): boolean {
  return (
    (message.role === 'tool' || message.role === 'assistant') &&
    message.tool_name !== undefined &&
    message.input !== undefined &&
    message.is_error === undefined
  );
}

/** Native content is text; structured outputs travel as their JSON. */
export function toolOutputText(output: unknown): string {
  if (typeof output === 'string') return output;
  if (output === undefined) return '';
  try {
    return JSON.stringify(output) ?? String(output);
  } catch {
    // Circular or BigInt-bearing outputs still need to reach the model as something readable.
    return String(output);
  }
}

/**
 * What the model reads as the result of a call the user (or policy) refused. A denial has no
 * output of its own, so the text must say so; the reason, when given, lets the model adapt.
 */
export function deniedResultText(reason?: string): string {
  return reason ? `Tool call denied: ${reason}` : 'Tool call denied';
}
