import type { DynamicToolUIPart, UIMessage } from 'ai';
import type { Message } from '../contract/messages.ts';
import { StepTracker } from './steps.ts';
import { isToolCallMessage } from '../contract/tool-messages.ts';
import { isToolPart, type ToolPart } from './tool-parts.ts';

/**
 * Native messages → Vercel `UIMessage`s, for JSON replies in the Vercel format. The assistant
 * side of a turn (its text, calls and results) becomes ONE assistant message, the same message
 * the streaming client would have built from the same turn.
 */

export interface NativeToUiOptions {
  /** Ids for messages that have none: `${idPrefix}${index}`. */
  idPrefix?: string;
  /** The id of the first assistant message built, when it continues none: a turn's, as its stream names it. */
  messageId?: string;
  /**
   * The assistant message a continuation turn continues. The turn's first assistant run is merged
   * into it (its id kept, the results of its calls applied in place), as the streaming client does.
   */
  continues?: UIMessage;
}


class AssistantBuilder {
  readonly message: UIMessage;
  readonly #steps = new StepTracker();

  constructor(id: string, from?: UIMessage) {
    this.message =
      from === undefined
        ? { id, role: 'assistant', parts: [] }
        : { ...structuredClone(from), id: from.id, role: 'assistant' };
  }

  text(content: string): void {
    this.#output();
    this.message.parts.push({ type: 'text', text: content, state: 'done' });
  }

  call(message: Message): void {
    const toolCallId = message.tool_call_id ?? '';
    const name = message.tool_name ?? 'unknown';
    this.#output();
    this.#steps.call(toolCallId);
    const base = { type: `tool-${name}` as const, toolCallId, input: message.input };
    const approval = message.approval;
    let part: ToolPart;
    if (approval === undefined) part = { ...base, state: 'input-available' };
    else if (approval.approved === undefined) part = { ...base, state: 'approval-requested', approval: { id: approval.id } };
    else part = { ...base, state: 'approval-responded', approval: withReason({ id: approval.id, approved: approval.approved }, approval.reason) };
    const index = this.#find(toolCallId);
    if (index === -1) this.message.parts.push(part);
    else this.message.parts[index] = part;
  }

  /** Returns false when the call is not in this message; the caller decides where it goes. */
  result(message: Message): boolean {
    const toolCallId = message.tool_call_id ?? '';
    const index = this.#find(toolCallId);
    if (index === -1) return false;
    this.#steps.result(toolCallId);
    this.message.parts[index] = settle(this.message.parts[index] as ToolPart, message);
    return true;
  }

  /** A result whose call is nowhere to be seen: keep it visible rather than drop it. */
  orphan(message: Message): void {
    const toolCallId = message.tool_call_id ?? '';
    this.#steps.result(toolCallId);
    const part: DynamicToolUIPart = {
      type: 'dynamic-tool',
      toolName: message.tool_name ?? 'unknown',
      toolCallId,
      state: 'input-available',
      input: undefined,
    };
    this.message.parts.push(settle(part, message));
  }

  #output(): void {
    for (const boundary of this.#steps.beforeOutput()) {
      if (boundary === 'start-step') this.message.parts.push({ type: 'step-start' });
    }
  }

  #find(toolCallId: string): number {
    return this.message.parts.findIndex((p) => isToolPart(p) && p.toolCallId === toolCallId);
  }
}

/**
 * A call's part once its result is known. A call the user denied becomes `output-denied`; a
 * granted approval stays on the part (the SDK only allows `approved: true` on outputs).
 */
function settle(part: ToolPart, result: Message): ToolPart {
  const approval = part.approval as { id: string; approved?: boolean; reason?: string } | undefined;
  const call: Record<string, unknown> = { ...part };
  for (const key of ['state', 'approval', 'output', 'errorText']) delete call[key];
  if (approval !== undefined && approval.approved === false) {
    return { ...call, state: 'output-denied', approval: withReason({ id: approval.id, approved: false }, approval.reason) } as ToolPart;
  }
  // An approval still undecided in this list was answered out of band; a successful result
  // proves it was granted, an error result proves nothing, so it is left off.
  const granted = approval !== undefined && (approval.approved === true || !result.is_error);
  const grant = granted ? { approval: withReason({ id: approval.id, approved: true }, approval.reason) } : {};
  if (result.is_error) return { ...call, state: 'output-error', errorText: result.content, ...grant } as ToolPart;
  return { ...call, state: 'output-available', output: result.content, ...grant } as ToolPart;
}

function withReason<T extends object>(approval: T, reason: string | undefined): T & { reason?: string } {
  return reason === undefined ? approval : { ...approval, reason };
}

export function nativeToUi(messages: readonly Message[], opts: NativeToUiOptions = {}): UIMessage[] {
  const prefix = opts.idPrefix ?? 'msg-';
  const out: UIMessage[] = [];
  const builders: AssistantBuilder[] = [];
  let current: AssistantBuilder | undefined;
  const nextId = (): string => `${prefix}${out.length}`;

  const assistant = (): AssistantBuilder => {
    if (current === undefined) {
      const first = builders.length === 0;
      const continues = out.length === 0 ? opts.continues : undefined;
      current = new AssistantBuilder((first && opts.messageId) || nextId(), continues);
      builders.push(current);
      out.push(current.message);
    }
    return current;
  };

  for (const message of messages) {
    if (message.role === 'user' || message.role === 'system') {
      current = undefined;
      out.push({ id: message.id ?? nextId(), role: message.role, parts: [{ type: 'text', text: message.content }] });
    } else if (message.role === 'assistant') {
      if (message.content !== '') assistant().text(message.content);
    } else if (isToolCallMessage(message)) {
      assistant().call(message);
    } else {
      const builder = assistant();
      // A result may answer a call made in an earlier assistant message of the same list.
      if (!builder.result(message) && !builders.some((b) => b !== builder && b.result(message))) builder.orphan(message);
    }
  }
  return out;
}
