import type { FinishReason, UIMessage, UIMessageChunk } from 'ai';
import type { AgentEvent, EventOf, PendingInteraction, RanRevision, StopReason, Usage } from '../contract/events.ts';
import { messageChunks } from './message-chunks.ts';
import { StepTracker } from './steps.ts';
import { deniedResultText, toolOutputText } from '../contract/tool-messages.ts';
import { addUsage } from './usage.ts';

/**
 * The AI SDK 7 UI message stream (reference/vercel-ai-sdk.md §1) projected from native events, so
 * `useChat` talks to agentd directly. The client's `readUIMessageStream` is the judge of
 * correctness: every chunk must find the part it refers to.
 */

/** Say the chunks (and a JSON reply's messages) are the Vercel representation, on any wire. */
export const VERCEL_FORMAT_HEADERS: Readonly<Record<string, string>> = {
  'x-ag-messages-format': 'vercel',
  'x-ag-messages-version': 'v1',
};

/**
 * The SSE stream's headers. Only it says `x-vercel-ai-ui-message-stream`: that header tells an AI
 * SDK client to read the body as the UI message stream over SSE, which the same chunks as NDJSON
 * lines are not.
 */
export const VERCEL_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
  ...VERCEL_FORMAT_HEADERS,
};

/** The SDK's transport ignores it, but its own server writes it and other clients wait for it. */
export const VERCEL_DONE = 'data: [DONE]\n\n';

export function vercelSseFrame(chunk: UIMessageChunk): string {
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

/**
 * The id of the assistant message a turn's Vercel stream builds: the message it continues, or a
 * new one named for the turn. A continuation answered through the API rebuilds it from here too.
 */
export function streamMessageId(turnId: string, continues: UIMessage | undefined): string {
  return continues?.id ?? `msg-${turnId}`;
}

export interface VercelStartMetadata {
  session_id: string;
  trace_id: string;
  /** The stored revision the turn runs, when its request named one by references. */
  revision?: RanRevision;
}

interface VercelFinishMetadata {
  stop_reason: StopReason;
  usage?: Usage;
  /** `null` only on a continuation that ends without one, see `continues`. */
  pending_interaction?: PendingInteraction | null;
}

export interface VercelProjectorOptions {
  /** The continued assistant message's id on a continuation, so the client appends to it. */
  messageId: string;
  startMetadata: VercelStartMetadata;
  /**
   * The stream continues an assistant message the client already holds. The client merges
   * metadata into that message key by key (an absent key keeps its old value), so the paused
   * turn's `pending_interaction` would outlive its answer unless the finish clears it.
   */
  continues?: boolean;
  /**
   * On a replay of a continuation for a client that holds nothing (useChat's resume starts from an
   * empty message): the continued message, rebuilt first with its metadata under ours.
   */
  rebuilds?: UIMessage;
}

/**
 * The finish reason a turn's stop reason reads as. A pause is `other`, as the reference's stream
 * says it and its clients test for; `finish.messageMetadata.stop_reason` tells which pause.
 */
export function finishReasonOf(stopReason: StopReason): FinishReason {
  switch (stopReason) {
    case 'end_turn':
      return 'stop';
    case 'max_tokens':
      return 'length';
    case 'error':
      return 'error';
    default:
      return 'other';
  }
}

export class VercelProjector {
  readonly #messageId: string;
  readonly #startMetadata: VercelStartMetadata & { sessionId: string; traceId: string };
  readonly #continues: boolean;
  readonly #rebuilds: UIMessage | undefined;
  readonly #steps = new StepTracker();
  readonly #openText = new Set<string>();
  readonly #openReasoning = new Set<string>();
  /** Calls streamed by this turn, and whether an approval was already asked for each. */
  readonly #calls = new Map<string, { approvalRequested: boolean }>();
  #usage: Usage | undefined;
  #lastInteraction: PendingInteraction | undefined;
  #started = false;
  #finished = false;

  constructor(opts: VercelProjectorOptions) {
    this.#messageId = opts.messageId;
    const { session_id, trace_id } = opts.startMetadata;
    // Also under the names the reference's stream gives them, which its clients read.
    this.#startMetadata = { ...opts.startMetadata, sessionId: session_id, traceId: trace_id };
    this.#continues = opts.continues ?? false;
    this.#rebuilds = opts.rebuilds;
  }

  push(event: AgentEvent): UIMessageChunk[] {
    if (this.#finished) return [];
    const out: UIMessageChunk[] = [];
    if (!this.#started) {
      // A stream joined mid-turn still needs `start`, or the client has no message to build.
      this.#started = true;
      const rebuilt = this.#rebuilds;
      out.push({ type: 'start', messageId: this.#messageId, messageMetadata: { ...(rebuilt?.metadata as object | undefined), ...this.#startMetadata } });
      if (rebuilt) out.push(...messageChunks(rebuilt));
    }
    switch (event.type) {
      case 'turn_start':
        break;
      case 'message_start':
        this.#openPart(out, this.#openText, 'text-start', event.data.id);
        break;
      case 'message_delta':
        this.#openPart(out, this.#openText, 'text-start', event.data.id);
        out.push({ type: 'text-delta', id: event.data.id, delta: event.data.delta });
        break;
      case 'message_end':
        if (this.#openText.delete(event.data.id)) out.push({ type: 'text-end', id: event.data.id });
        break;
      case 'thought_start':
        this.#openPart(out, this.#openReasoning, 'reasoning-start', event.data.id);
        break;
      case 'thought_delta':
        this.#openPart(out, this.#openReasoning, 'reasoning-start', event.data.id);
        out.push({ type: 'reasoning-delta', id: event.data.id, delta: event.data.delta });
        break;
      case 'thought_end':
        if (this.#openReasoning.delete(event.data.id)) out.push({ type: 'reasoning-end', id: event.data.id });
        break;
      case 'tool_call':
        this.#toolCall(out, event);
        break;
      case 'tool_result':
        this.#toolResult(out, event);
        break;
      case 'interaction_request':
        this.#lastInteraction = event.data;
        // A client tool (and a user_input request) leaves its part `input-available` for the
        // client to fulfil; only an approval has a chunk of its own.
        if (event.data.kind === 'user_approval') {
          const toolCallId = event.data.payload.tool_call_id;
          const call = this.#calls.get(toolCallId);
          if (call !== undefined) call.approvalRequested = true;
          out.push({ type: 'tool-approval-request', approvalId: event.data.id, toolCallId });
        }
        break;
      case 'usage':
        this.#usage = addUsage(this.#usage, event.data);
        break;
      case 'error':
        // A stopped turn is no failure: `abort` is how the SDK's own server ends one, and it
        // leaves useChat ready with what was streamed, where `error` would show a failed chat.
        if (event.data.type === 'turn-cancelled') out.push({ type: 'abort', reason: event.data.message });
        else out.push({ type: 'error', errorText: event.data.message });
        break;
      case 'done':
        this.#done(out, event);
        break;
    }
    return out;
  }

  #openPart(out: UIMessageChunk[], open: Set<string>, type: 'text-start' | 'reasoning-start', id: string): void {
    if (open.has(id)) return;
    this.#boundaries(out, this.#steps.beforeOutput());
    open.add(id);
    out.push({ type, id });
  }

  #toolCall(out: UIMessageChunk[], event: EventOf<'tool_call'>): void {
    const { id: toolCallId, name: toolName, input } = event.data;
    this.#boundaries(out, this.#steps.beforeOutput());
    this.#steps.call(toolCallId);
    if (!this.#calls.has(toolCallId)) this.#calls.set(toolCallId, { approvalRequested: false });
    out.push({ type: 'tool-input-start', toolCallId, toolName });
    out.push({ type: 'tool-input-available', toolCallId, toolName, input });
  }

  #toolResult(out: UIMessageChunk[], event: EventOf<'tool_result'>): void {
    const { id: toolCallId, output, is_error, denied } = event.data;
    this.#steps.result(toolCallId);
    if (denied === true) {
      const call = this.#calls.get(toolCallId);
      if (call !== undefined && !call.approvalRequested) {
        // Denied by policy, not by a person: the SDK requires an `output-denied` part to carry
        // its (denied) approval, so record an automatic one, as the SDK's own server does.
        const approvalId = `${toolCallId}:policy`;
        const reason = toolOutputText(output) || deniedResultText();
        out.push({ type: 'tool-approval-request', approvalId, toolCallId, isAutomatic: true });
        out.push({ type: 'tool-approval-response', approvalId, approved: false, reason });
      }
      out.push({ type: 'tool-output-denied', toolCallId });
    } else if (is_error) {
      out.push({ type: 'tool-output-error', toolCallId, errorText: toolOutputText(output) });
    } else {
      out.push({ type: 'tool-output-available', toolCallId, output });
    }
  }

  #done(out: UIMessageChunk[], event: EventOf<'done'>): void {
    // An interrupted turn can leave parts open; the client would show them streaming forever.
    for (const id of this.#openText) out.push({ type: 'text-end', id });
    for (const id of this.#openReasoning) out.push({ type: 'reasoning-end', id });
    this.#openText.clear();
    this.#openReasoning.clear();
    this.#boundaries(out, this.#steps.end());

    const { stop_reason } = event.data;
    const pending = event.data.pending_interaction ?? (stop_reason === 'paused' ? this.#lastInteraction : undefined);
    const metadata: VercelFinishMetadata = { stop_reason };
    if (this.#usage !== undefined) metadata.usage = { ...this.#usage };
    if (pending !== undefined) metadata.pending_interaction = pending;
    else if (this.#continues) metadata.pending_interaction = null;
    out.push({ type: 'finish', finishReason: finishReasonOf(stop_reason), messageMetadata: metadata });
    this.#finished = true;
  }

  #boundaries(out: UIMessageChunk[], boundaries: readonly ('start-step' | 'finish-step')[]): void {
    for (const type of boundaries) out.push({ type });
  }
}
