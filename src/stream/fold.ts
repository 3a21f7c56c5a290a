import type { AgentEvent, PendingInteraction, StopReason, Usage } from '../contract/events.ts';
import type { Message } from '../contract/messages.ts';
import { deniedResultText, toolCallMessage, toolOutputText, toolResultMessage } from '../contract/tool-messages.ts';
import { addUsage } from './usage.ts';

/** A turn's event stream folded into the JSON reply's `data.outputs` (spec §2.5, §2.6). */
export interface FoldedTurn {
  messages: Message[];
  stop_reason?: StopReason;
  pending_interaction?: PendingInteraction;
  usage?: Usage;
  error?: { code: number; type?: string; message: string };
}

/**
 * Folds incrementally, so a streaming handler can keep the folded turn (for persistence and for
 * the final trimmed output) without buffering events. Messages keep event order, which is what
 * makes the output read tool call, tool result, final assistant message.
 */
export class TurnFolder {
  #messages: Message[] = [];
  #texts = new Map<string, Message>();
  #calls = new Map<string, Message>();
  #results = new Set<Message>();
  #usage: Usage | undefined;
  #stopReason: StopReason | undefined;
  #pending: PendingInteraction | undefined;
  #lastInteraction: PendingInteraction | undefined;
  #error: FoldedTurn['error'];

  push(event: AgentEvent): void {
    switch (event.type) {
      case 'message_start':
        this.#text(event.data.id);
        break;
      case 'message_delta':
        this.#text(event.data.id).content += event.data.delta;
        break;
      case 'tool_call': {
        const known = this.#calls.get(event.data.id);
        if (known !== undefined) {
          // A repeated call refreshes its arguments; it is still one call.
          known.input = event.data.input;
          known.tool_name = event.data.name;
          break;
        }
        const call = toolCallMessage(event.data.id, event.data.name, event.data.input);
        this.#calls.set(event.data.id, call);
        this.#messages.push(call);
        break;
      }
      case 'tool_result': {
        const { id, output, is_error, denied } = event.data;
        const content = toolOutputText(output);
        const result = denied === true ? toolResultMessage(id, content || deniedResultText(), true) : toolResultMessage(id, content, is_error);
        this.#results.add(result);
        this.#messages.push(result);
        break;
      }
      case 'interaction_request': {
        this.#lastInteraction = event.data;
        if (event.data.kind !== 'user_approval') break;
        const call = this.#calls.get(event.data.payload.tool_call_id);
        if (call !== undefined) call.approval = { id: event.data.id };
        break;
      }
      case 'usage':
        this.#usage = addUsage(this.#usage, event.data);
        break;
      case 'error':
        this.#error = { ...event.data };
        break;
      case 'done':
        this.#stopReason = event.data.stop_reason;
        this.#pending = event.data.pending_interaction;
        break;
      case 'turn_start':
      case 'message_end':
      case 'thought_start':
      case 'thought_delta':
      case 'thought_end':
        break;
    }
  }

  result(): FoldedTurn {
    // Providers open empty text blocks around tool calls; they carry nothing for the caller.
    const messages = this.#callOrdered(this.#messages.filter((m) => !(m.role === 'assistant' && m.content === ''))).map((m) =>
      m.approval === undefined ? { ...m } : { ...m, approval: { ...m.approval } },
    );
    const folded: FoldedTurn = { messages };
    if (this.#stopReason !== undefined) folded.stop_reason = this.#stopReason;
    const pending = this.#pending ?? (this.#stopReason === 'paused' ? this.#lastInteraction : undefined);
    if (pending !== undefined) folded.pending_interaction = pending;
    if (this.#usage !== undefined) folded.usage = { ...this.#usage };
    if (this.#error !== undefined) folded.error = { ...this.#error };
    return folded;
  }

  /**
   * A step's tools run side by side and their results come as each finishes; the output lists
   * each run of results in the order of their calls, so it does not depend on which was quicker.
   * Results of calls this turn did not make (a continuation's) keep the order they came in.
   */
  #callOrdered(messages: Message[]): Message[] {
    const order = new Map([...this.#calls.keys()].map((id, i) => [id, i]));
    const rank = (m: Message) => order.get(m.tool_call_id!) ?? -1;
    const out: Message[] = [];
    for (let i = 0; i < messages.length; ) {
      let end = i;
      while (end < messages.length && this.#results.has(messages[end]!)) end++;
      if (end === i) out.push(messages[i++]!);
      else {
        out.push(...messages.slice(i, end).sort((a, b) => rank(a) - rank(b)));
        i = end;
      }
    }
    return out;
  }

  #text(id: string): Message {
    let message = this.#texts.get(id);
    if (message === undefined) {
      message = { role: 'assistant', content: '' };
      this.#texts.set(id, message);
      this.#messages.push(message);
    }
    return message;
  }
}

export function foldEvents(events: Iterable<AgentEvent>): FoldedTurn {
  const folder = new TurnFolder();
  for (const event of events) folder.push(event);
  return folder.result();
}

/**
 * `last` transcript mode: the unit a caller needs to act on. A final answer stands alone; a turn
 * that ends in tool messages (a pause) needs the message that led to them as well.
 */
export function trimToTrailingUnit(messages: readonly Message[]): Message[] {
  const last = messages.at(-1);
  if (last === undefined) return [];
  if (last.role !== 'tool') return [last];
  let start = messages.length - 1;
  while (start > 0 && messages[start - 1]?.role === 'tool') start--;
  return messages.slice(Math.max(0, start - 1));
}
