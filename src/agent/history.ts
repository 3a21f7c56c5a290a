import type { AssistantContent, ModelMessage, ToolContent, ToolResultPart } from 'ai';
import type { Message } from '../contract/messages.ts';
import { messagePath } from '../contract/message-sources.ts';
import { isToolCallMessage } from '../contract/tool-messages.ts';
import { AppError } from '../errors.ts';

/** A tool call in the inbound history, and what the caller says about it. */
export interface HistoryCall {
  index: number;
  toolCallId: string;
  toolName: string;
  input: unknown;
  approval?: { id: string; approved?: boolean; reason?: string };
  result?: { index: number; content: string; isError: boolean };
}

/**
 * Reads the calls out of a native history and pairs each with its result. The trailing calls (after
 * the last user message) are the ones a continuation may answer; earlier unanswered calls were
 * abandoned when the user spoke again.
 */
export function collectCalls(messages: Message[]): { calls: HistoryCall[]; trailing: HistoryCall[] } {
  const byId = new Map<string, HistoryCall>();
  const calls: HistoryCall[] = [];
  let lastUser = -1;
  messages.forEach((m, index) => {
    if (m.role === 'user') lastUser = index;
    if (isToolCallMessage(m)) {
      if (!m.tool_call_id) throw new AppError('invalid-messages', `a tool-call message needs "tool_call_id" at ${messagePath(messages, index)}`);
      if (byId.has(m.tool_call_id)) throw new AppError('invalid-messages', `duplicate tool call "${m.tool_call_id}" at ${messagePath(messages, index)}`);
      const call: HistoryCall = { index, toolCallId: m.tool_call_id, toolName: m.tool_name!, input: m.input };
      if (m.approval) call.approval = m.approval;
      byId.set(m.tool_call_id, call);
      calls.push(call);
    } else if (m.role === 'tool') {
      if (!m.tool_call_id) throw new AppError('invalid-messages', `a tool-result message needs "tool_call_id" at ${messagePath(messages, index)}`);
      const call = byId.get(m.tool_call_id);
      if (!call) {
        throw new AppError('invalid-messages', `tool result for unknown call "${m.tool_call_id}" at ${messagePath(messages, index)}; the tool-call message must come first`);
      }
      if (call.result) throw new AppError('invalid-messages', `second result for call "${m.tool_call_id}" at ${messagePath(messages, index)}`);
      call.result = { index, content: m.content, isError: m.is_error ?? false };
    }
  });
  return { calls, trailing: calls.filter((c) => c.index > lastUser) };
}

/**
 * A call's result as the model reads it. A call the user denied is told as the SDK's own
 * `execution-denied`, as it was right after the decision: providers render that as the reason
 * alone, and the re-sent conversation must read the same as the one the model already answered.
 */
function resultOutput(call: HistoryCall, result: NonNullable<HistoryCall['result']>): ToolResultPart['output'] {
  if (call.approval?.approved === false) return { type: 'execution-denied', ...(call.approval.reason ? { reason: call.approval.reason } : {}) };
  return result.isError ? { type: 'error-text', value: result.content } : { type: 'text', value: result.content };
}

/**
 * Converts a validated native history to AI SDK model messages. A call whose approval carries a
 * decision becomes the SDK's own approval request/response pair, so `streamText` runs or refuses
 * the tool exactly as its approval protocol defines. Calls that were abandoned (no result, and the
 * user spoke after them) are dropped: the provider would reject a call with no result.
 */
export function toModelMessages(messages: Message[], calls: HistoryCall[]): { system: string[]; messages: ModelMessage[] } {
  const callAt = new Map(calls.map((c) => [c.index, c]));
  const resultAt = new Map(calls.flatMap((c) => (c.result ? [[c.result.index, c] as const] : [])));
  const system: string[] = [];
  const out: ModelMessage[] = [];
  let assistant: Exclude<AssistantContent, string> | undefined;
  let tool: ToolContent | undefined;
  // A call after a result starts the model's next step; approval responses (which have no message
  // of their own) belong to the step of their call and never split it.
  let sawResult = false;
  // The SDK runs decisions only from the end of the conversation; one the user spoke after came too
  // late (its interaction is cancelled with the pause), so its call is abandoned like any other.
  const lastUser = messages.findLastIndex((m) => m.role === 'user');

  const flush = () => {
    if (assistant?.length) out.push({ role: 'assistant', content: assistant });
    if (tool?.length) out.push({ role: 'tool', content: tool });
    assistant = undefined;
    tool = undefined;
    sawResult = false;
  };

  messages.forEach((m, index) => {
    const call = callAt.get(index);
    if (call) {
      const decided = call.approval?.approved !== undefined;
      if (!call.result && (!decided || index < lastUser)) return;
      if (sawResult) flush();
      assistant ??= [];
      assistant.push({ type: 'tool-call', toolCallId: call.toolCallId, toolName: call.toolName, input: call.input });
      if (!call.result && call.approval) {
        assistant.push({ type: 'tool-approval-request', approvalId: call.approval.id, toolCallId: call.toolCallId });
        tool ??= [];
        tool.push({
          type: 'tool-approval-response',
          approvalId: call.approval.id,
          approved: call.approval.approved!,
          ...(call.approval.reason ? { reason: call.approval.reason } : {}),
        });
      }
      return;
    }
    const answered = resultAt.get(index);
    if (answered?.result) {
      tool ??= [];
      tool.push({ type: 'tool-result', toolCallId: answered.toolCallId, toolName: answered.toolName, output: resultOutput(answered, answered.result) });
      sawResult = true;
      return;
    }
    switch (m.role) {
      case 'system':
        system.push(m.content);
        return;
      case 'user':
        flush();
        out.push({ role: 'user', content: m.content });
        return;
      case 'assistant':
        if (tool?.length) flush();
        if (m.content) {
          assistant ??= [];
          assistant.push({ type: 'text', text: m.content });
        }
        return;
      case 'tool':
        return;
    }
  });
  flush();
  return { system, messages: out };
}
