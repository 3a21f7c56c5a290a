import { z } from 'zod';
import { ToolInput, UIMessage, type Approval, type Message } from '../contract/messages.ts';
import { sourced } from '../contract/message-sources.ts';
import { deniedResultText, toolCallMessage, toolOutputText, toolResultMessage } from '../contract/tool-messages.ts';
import { invalidAt, parseAt } from './inbound-errors.ts';
import { readAttachment, type Attachment } from './inbound-files.ts';
import { isToolType } from './tool-parts.ts';
import { isObject } from '../objects.ts';

/**
 * Inbound Vercel `UIMessage`s (what `useChat` posts) → native messages. The in-band approval
 * decision is a tool part in state `approval-responded`, exactly as `addToolApprovalResponse`
 * leaves it (design.md §4 "In-band decisions"); it becomes a call carrying
 * `approval: {id, approved, reason?}` with no result, which is the native form of a decision.
 * A user message's `file` parts (`sendMessage({text, files})`) are decoded beside the messages,
 * for the turn to put into the session folder (src/sessions/attachments.ts); nothing here writes.
 *
 * Every rejection names the JSON path of the offending value, so a client can find it.
 */

export interface UiToNativeOptions {
  /** Where the messages sit in the request, for error paths. */
  path?: string;
  /**
   * Where the `file` parts of user messages go, decoded, for the turn to put into the session
   * folder. Without it they are refused: a file must reach the agent or be an error, never be lost.
   */
  attachments?: Attachment[];
}

/**
 * Parts that carry nothing the model needs from history (reasoning is the model's own scratch). A
 * `file` is ignored only in an assistant message, where a model made it; a user message's is
 * delivered (textOf).
 */
const IGNORED_PARTS = new Set(['step-start', 'reasoning', 'source-url', 'source-document', 'file', 'reasoning-file', 'custom']);

const TOOL_STATES = [
  'input-streaming',
  'input-available',
  'approval-requested',
  'approval-responded',
  'output-available',
  'output-error',
  'output-denied',
] as const;

const TextPart = z.looseObject({ type: z.literal('text'), text: z.string() });
const ApprovalRequest = z.looseObject({ id: z.string().min(1) });
const ApprovalDecision = z.looseObject({ id: z.string().min(1), approved: z.boolean(), reason: z.string().optional() });
const toolBase = { type: z.string(), toolCallId: z.string().min(1), input: ToolInput.optional() };
const ToolPart = z.discriminatedUnion('state', [
  z.looseObject({ ...toolBase, state: z.literal('input-available') }),
  z.looseObject({ ...toolBase, state: z.literal('approval-requested'), approval: ApprovalRequest }),
  z.looseObject({ ...toolBase, state: z.literal('approval-responded'), approval: ApprovalDecision }),
  z.looseObject({ ...toolBase, state: z.literal('output-available'), output: z.unknown(), approval: ApprovalDecision.optional() }),
  // A call whose input the model got wrong ends here with that raw input (the SDK's `tool-input-error`).
  z.looseObject({ ...toolBase, state: z.literal('output-error'), input: z.unknown().optional(), errorText: z.string(), approval: ApprovalDecision.optional() }),
  // The SDK always sets the approval; parts persisted by older clients may lack it (vercel/ai#15787).
  z.looseObject({ ...toolBase, state: z.literal('output-denied'), approval: ApprovalDecision.optional() }),
]);
type ToolPart = z.infer<typeof ToolPart>;
const DynamicToolName = z.looseObject({ toolName: z.string().min(1) });

export function uiToNative(messages: unknown, opts: UiToNativeOptions = {}): Message[] {
  const base = opts.path ?? 'data.inputs.messages';
  if (!Array.isArray(messages)) invalidAt(`expected an array of UI messages, received ${kindOf(messages)}`, base);
  const out: Message[] = [];
  messages.forEach((raw, i) => {
    const at = `${base}[${i}]`;
    const message = parseAt(UIMessage, withTextParts(raw), at);
    if (message.role === 'assistant') {
      out.push(...assistantMessages(message.parts, at));
    } else {
      const native: Message = { id: message.id, role: message.role, content: textOf(message.parts, at, message.role, out.length, opts.attachments) };
      out.push(native);
    }
  });
  return out;
}

/** `{role, content: "text"}` written where a UIMessage belongs: its text as the one part. */
function withTextParts(raw: unknown): unknown {
  if (typeof raw !== 'object' || raw === null || 'parts' in raw || !('content' in raw) || typeof raw.content !== 'string') return raw;
  const { content, ...rest } = raw;
  return { ...rest, parts: [{ type: 'text', text: content }] };
}

/** A user or system message's text; a user message's files go to `attachments`, as the message numbered `index`. */
function textOf(parts: readonly { type: string }[], at: string, role: string, index: number, attachments: Attachment[] | undefined): string {
  let text = '';
  parts.forEach((part, j) => {
    const partAt = `${at}.parts[${j}]`;
    if (part.type === 'text') text += parseAt(TextPart, part, partAt).text;
    else if (isToolType(part.type)) invalidAt(`tool parts belong in assistant messages, not in a ${role} message`, partAt);
    else if (part.type === 'file') {
      if (role !== 'user') invalidAt(`files are attached to user messages, not to ${role} messages`, partAt);
      if (!attachments) invalidAt('files cannot be attached here', partAt);
      attachments.push(readAttachment(part, partAt, index));
    }
    else checkIgnorable(part.type, partAt);
  });
  return text;
}

/**
 * A UI tool part holds a call and its result together, but a model step makes all its calls
 * before any result exists. So, as the SDK's `convertToModelMessages` does, the results of a run
 * of tool parts follow all of that run's calls; text or a new step ends the run.
 */
function assistantMessages(parts: readonly { type: string }[], at: string): Message[] {
  const out: Message[] = [];
  let text: string | undefined;
  let results: Message[] = [];
  const flushText = (): void => {
    if (text) out.push({ role: 'assistant', content: text });
    text = undefined;
  };
  const flushResults = (): void => {
    out.push(...results);
    results = [];
  };
  parts.forEach((part, j) => {
    const partAt = `${at}.parts[${j}]`;
    if (part.type === 'text') {
      flushResults();
      text = (text ?? '') + parseAt(TextPart, part, partAt).text;
    } else if (isToolType(part.type)) {
      flushText();
      const [call, result] = toolMessages(part, partAt);
      out.push(call);
      if (result !== undefined) results.push(result);
    } else {
      if (part.type === 'step-start') flushResults();
      checkIgnorable(part.type, partAt);
    }
  });
  flushText();
  flushResults();
  return out;
}

function toolMessages(raw: { type: string }, at: string): [call: Message, result?: Message] {
  const state = (raw as { state?: unknown }).state;
  if (state === 'input-streaming') {
    invalidAt("tool call is still streaming its input (state 'input-streaming'); send the message once the call is complete", `${at}.state`);
  }
  if (typeof state !== 'string' || !(TOOL_STATES as readonly string[]).includes(state)) {
    invalidAt(`unknown tool part state ${JSON.stringify(state)}, expected one of ${TOOL_STATES.slice(1).join(', ')}`, `${at}.state`);
  }
  const part = parseAt(ToolPart, raw, at);
  const toolName = part.type === 'dynamic-tool' ? parseAt(DynamicToolName, raw, at).toolName : part.type.slice('tool-'.length);
  if (toolName === '') invalidAt("tool part type must name the tool, as in 'tool-<name>'", `${at}.type`);

  // Both messages of the part name the part itself in any later error.
  const input = part.state === 'output-error' && !isObject(part.input) ? {} : part.input;
  const call = (approval?: Approval): Message => sourced(toolCallMessage(part.toolCallId, toolName, input, approval), at);
  const result = (content: string, isError: boolean): Message => sourced(toolResultMessage(part.toolCallId, content, isError), at);
  switch (part.state) {
    case 'input-available':
      return [call()];
    case 'approval-requested':
      return [call({ id: part.approval.id })];
    case 'approval-responded':
      return [call(decision(part.approval))];
    case 'output-available':
      return [call(optionalDecision(part)), result(toolOutputText(part.output), false)];
    case 'output-error':
      return [call(optionalDecision(part)), result(part.errorText, true)];
    case 'output-denied': {
      // A denial is a call that never ran: the model must still see a result for it, and an
      // error result saying it was denied (with the reason, which is why the model should not
      // simply retry) reads best. The call keeps the decision so a re-posted history stays
      // recognisable as decided, not pending.
      const reason = part.approval?.reason;
      const approval: Approval | undefined =
        part.approval === undefined ? undefined : { ...decision(part.approval), approved: false };
      return [call(approval), result(deniedResultText(reason), true)];
    }
  }
}

function decision(approval: z.infer<typeof ApprovalDecision>): Approval {
  const out: Approval = { id: approval.id, approved: approval.approved };
  if (approval.reason !== undefined) out.reason = approval.reason;
  return out;
}

function optionalDecision(part: ToolPart): Approval | undefined {
  const approval = (part as { approval?: z.infer<typeof ApprovalDecision> }).approval;
  return approval === undefined ? undefined : decision(approval);
}

function checkIgnorable(type: string, at: string): void {
  if (IGNORED_PARTS.has(type) || type.startsWith('data-')) return;
  invalidAt(`unknown part type ${JSON.stringify(type)}`, `${at}.type`);
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'array' : typeof value;
}
