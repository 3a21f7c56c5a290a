import type { UIMessage } from 'ai';
import type { Message, MessagesFormat } from '../contract/messages.ts';
import type { InvokeRequest } from '../contract/invoke.ts';
import { AppError } from '../errors.ts';
import { nativeMessages } from '../stream/blocks-to-native.ts';
import type { Attachment } from '../stream/inbound-files.ts';
import { uiToNative } from '../stream/ui-messages.ts';

/** A conversation as a turn reads it: native messages, and the files its user messages carry. */
export interface Inbound {
  messages: Message[];
  /** Decoded, for the turn to put into the session folder before it starts (attachments.ts). */
  attachments: Attachment[];
}

/**
 * The conversation a turn reads: `data.inputs.messages`, or, when inputs are absent, the
 * `messages` of `data.testcase.data` — the agent declares that one input, so no other test case
 * column reaches it (spec §4.5.2).
 */
export function inboundMessages(request: InvokeRequest, format: MessagesFormat, inputsAt = 'data.inputs.messages'): Inbound | undefined {
  const data = request.data;
  const fromInputs = data?.inputs?.messages;
  const raw = fromInputs ?? (data?.inputs == null ? data?.testcase?.data?.messages : undefined);
  const where = fromInputs !== undefined && fromInputs !== null ? inputsAt : 'data.testcase.data.messages';
  if (raw === undefined || raw === null) return undefined;
  if (!Array.isArray(raw)) throw new AppError('invalid-messages', `${where} must be an array of messages`);
  const attachments: Attachment[] = [];
  const messages = format === 'vercel' ? uiToNative(raw, { path: where, attachments }) : nativeMessages(raw, where, attachments);
  return { messages, attachments };
}

/**
 * System messages join the instructions, so without any other there is nothing to answer; the
 * provider would refuse the empty prompt and the caller's mistake would read as a 502.
 */
export function checkAnswerable(messages: Message[], where: string): void {
  if (messages.every((m) => m.role === 'system')) throw new AppError('invalid-messages', `${where} holds only system messages; add at least one user message`);
}

/**
 * The assistant message a Vercel-format turn continues: the inbound conversation's last message,
 * when it is an assistant one (the client re-posts it carrying its decisions or tool outputs).
 * Read after `inboundMessages` has checked the conversation.
 */
export function continuedMessage(request: InvokeRequest, format: MessagesFormat): UIMessage | undefined {
  if (format !== 'vercel') return undefined;
  const messages = request.data?.inputs?.messages;
  const last = Array.isArray(messages) ? (messages.at(-1) as { role?: unknown; id?: unknown } | undefined) : undefined;
  return last?.role === 'assistant' && typeof last.id === 'string' ? (last as UIMessage) : undefined;
}
