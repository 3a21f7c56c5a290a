import { sourced } from '../contract/message-sources.ts';
import { Decision, Message, TextPart, ToolCallBlock, ToolResultBlock, type Approval } from '../contract/messages.ts';
import { toolCallMessage, toolOutputText, toolResultMessage } from '../contract/tool-messages.ts';
import { isObject } from '../objects.ts';
import { invalidAt, parseAt } from './inbound-errors.ts';
import { readAttachment, type Attachment } from './inbound-files.ts';

/**
 * Inbound native messages (spec §2.5). An assistant message may also hold its calls and the
 * caller's decisions as content blocks, the reference implementation's native format
 * (reference/agenta-agent-service.md §3), so a client written for it can answer a pause in band:
 *
 * - `{type: "tool_call", toolCallId, toolName, input}` is a tool-call message;
 * - `{type: "tool_result", toolCallId, output: {approved, interactionToken, reason?}}` is the
 *   decision on that call, `approval: {id: interactionToken, approved, reason?}`;
 * - any other `tool_result` is the call's result (a client tool's), `isError` saying whether it
 *   failed;
 * - `{type: "text", text}` is the assistant's text.
 *
 * A user message's content may hold files, `{type: "file", url: "data:…", mediaType?, filename?}`
 * (the Vercel `file` part, one schema for both): they go to `attachments`, decoded, for the turn to
 * put into the session folder; without it they are refused. One in an assistant message is a file
 * a model made, history the model needs nothing of: ignored, as in a UIMessage.
 *
 * Every rejection names the JSON path of the offending value.
 */
export function nativeMessages(raw: readonly unknown[], where: string, attachments?: Attachment[]): Message[] {
  const out: Message[] = [];
  raw.forEach((message, i) => {
    const plain = plainText(message);
    if (plain) {
      out.push(plain);
      return;
    }
    const at = `${where}[${i}]`;
    if (hasToolBlocks(message)) {
      out.push(...fromBlocks(message, at, out));
      return;
    }
    if (hasFileBlocks(message)) {
      out.push(withFiles(message, at, out.length, attachments));
      return;
    }
    // Read as a native message, a UIMessage would be one with no text: the model would answer
    // an empty message, and the caller would never learn why.
    if (isObject(message) && message.content == null && Array.isArray(message.parts)) {
      invalidAt('a message with "parts" and no "content" is a Vercel UIMessage; send x-ag-messages-format: vercel with such a conversation, or put the text of a native message in "content"', at);
    }
    out.push(parseAt(Message, message, at));
  });
  return out;
}

const ROLES: ReadonlySet<unknown> = new Set(Message.shape.role.options);

/**
 * A role and its text, and nothing else: most of a long conversation, and what the schema would
 * give back for it. Told apart by hand in a tenth of the schema's time (BENCHMARKS.md, "A long
 * history handed to the turn thread"); anything else goes through the schema.
 */
function plainText(message: unknown): Message | undefined {
  if (!isObject(message) || typeof message.content !== 'string' || !ROLES.has(message.role)) return undefined;
  for (const key in message) if (key !== 'role' && key !== 'content') return undefined;
  return { role: message.role as Message['role'], content: message.content };
}

type Blocks = { role?: unknown; content: unknown[] };

function hasToolBlocks(message: unknown): message is Blocks {
  if (!isObject(message) || !Array.isArray(message.content)) return false;
  return message.content.some((block) => isObject(block) && (block.type === 'tool_call' || block.type === 'tool_result'));
}

function hasFileBlocks(message: unknown): message is Blocks {
  return isObject(message) && Array.isArray(message.content) && message.content.some((block) => isObject(block) && block.type === 'file');
}

/** A message whose content holds files: its text blocks are its content, its files go to `attachments`. */
function withFiles(message: Blocks, at: string, index: number, attachments: Attachment[] | undefined): Message {
  let text = '';
  message.content.forEach((block, j) => {
    const blockAt = `${at}.content[${j}]`;
    if (!isObject(block) || block.type !== 'file') {
      text += parseAt(TextPart, block, blockAt).text;
      return;
    }
    // A file in an assistant message is one a model made: history, ignored as in a UIMessage.
    if (message.role === 'assistant') return;
    if (message.role !== 'user') invalidAt(`files are attached to user messages, not to ${String(message.role)} messages`, blockAt);
    if (!attachments) invalidAt('files cannot be attached here', blockAt);
    attachments.push(readAttachment(block, blockAt, index));
  });
  return parseAt(Message, { ...message, content: text }, at);
}

/** One message of blocks → the messages of spec §2.5; a decision lands on its call, here or in `earlier`. */
function fromBlocks(message: Blocks, at: string, earlier: readonly Message[]): Message[] {
  if (message.role !== 'assistant') invalidAt('tool_call and tool_result blocks belong in an assistant message', `${at}.role`);
  const out: Message[] = [];
  let text = '';
  const flushText = (): void => {
    if (text) out.push({ role: 'assistant', content: text });
    text = '';
  };
  message.content.forEach((block, j) => {
    const blockAt = `${at}.content[${j}]`;
    const type = isObject(block) ? block.type : undefined;
    if (type === 'text') {
      text += parseAt(TextPart, block, blockAt).text;
    } else if (type === 'tool_call') {
      flushText();
      const call = parseAt(ToolCallBlock, block, blockAt);
      out.push(sourced(toolCallMessage(call.toolCallId, call.toolName, call.input ?? {}), blockAt));
    } else if (type === 'tool_result') {
      flushText();
      const result = parseAt(ToolResultBlock, block, blockAt);
      const approval = decisionOf(result.output, `${blockAt}.output`);
      if (approval === undefined) {
        out.push(sourced(toolResultMessage(result.toolCallId, toolOutputText(result.output), result.isError ?? false), blockAt));
        return;
      }
      const call = [...earlier, ...out].findLast((m) => m.tool_call_id === result.toolCallId && m.tool_name !== undefined);
      if (!call) invalidAt(`a decision on tool call "${result.toolCallId}", which no earlier tool_call block or tool-call message makes`, blockAt);
      // An error in the decision (an unknown token, an answered pause) is found later, on the call.
      sourced(call, blockAt).approval = approval;
    } else if (type !== 'file') {
      // (A file is one a model made: ignored, as in a message without calls.)
      invalidAt(`unknown content block type ${JSON.stringify(type)}; an assistant message's blocks are text, tool_call and tool_result`, `${blockAt}.type`);
    }
  });
  flushText();
  return out;
}

/** An output that decides an approval (it has `approved`), or undefined for a tool's own result. */
function decisionOf(output: unknown, at: string): Approval | undefined {
  if (!isObject(output) || !('approved' in output)) return undefined;
  const decision = parseAt(Decision, output, at);
  const reason = decision.reason ?? decision.message;
  return { id: decision.interactionToken, approved: decision.approved, ...(reason !== undefined ? { reason } : {}) };
}

