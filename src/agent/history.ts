import type { LanguageModelV4Message, LanguageModelV4ToolResultOutput } from '@ai-sdk/provider';
import { isToolInput, TOOL_INPUT_ERROR, type Message } from '../contract/messages.ts';
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
      if (call.result) {
        // The same result again is the same result: a client that answered a client tool in a
        // re-post, and appended the continuation it got (which tells that answer as its own), has two.
        if (call.result.content === m.content && call.result.isError === (m.is_error ?? false)) return;
        throw new AppError('invalid-messages', `second result for call "${m.tool_call_id}" at ${messagePath(messages, index)}; a call has one result`);
      }
      call.result = { index, content: m.content, isError: m.is_error ?? false };
    }
  });
  // Arguments that are not an object are the model's own mistake, kept on a call that failed for
  // it (a call cut off by the token limit, arguments that are not JSON), as the turn's output has
  // it; on any other call they would fail at the model.
  for (const call of calls) {
    if (!isToolInput(call.input) && !call.result?.isError) throw new AppError('invalid-messages', `${TOOL_INPUT_ERROR} at ${messagePath(messages, call.index, '.input')}`);
  }
  return { calls, trailing: calls.filter((c) => c.index > lastUser) };
}

/**
 * A call's result as the model reads it. A call the user denied is told as `execution-denied`, as
 * it was right after the decision: providers render that as the reason alone, and the re-sent
 * conversation must read the same as the one the model already answered.
 */
function resultOutput(call: HistoryCall, result: NonNullable<HistoryCall['result']>): LanguageModelV4ToolResultOutput {
  if (call.approval?.approved === false) return { type: 'execution-denied', ...(call.approval.reason ? { reason: call.approval.reason } : {}) };
  return result.isError ? { type: 'error-text', value: result.content } : { type: 'text', value: result.content };
}

type AssistantPart = Extract<LanguageModelV4Message, { role: 'assistant' }>['content'][number];
type ToolPart = Extract<LanguageModelV4Message, { role: 'tool' }>['content'][number];

/**
 * Converts a validated native history to the provider's prompt. A call with the caller's decision
 * and no result yet is in `decided`: the turn settles it (runs or refuses it) before its first
 * step and adds the outcome to the prompt. Calls that were abandoned (no result, and the user
 * spoke after them) are dropped: the provider would reject a call with no result.
 */
export function toPrompt(messages: Message[], calls: HistoryCall[]): { system: string[]; prompt: LanguageModelV4Message[]; decided: HistoryCall[] } {
  const callAt = new Map(calls.map((c) => [c.index, c]));
  const resultAt = new Map(calls.flatMap((c) => (c.result ? [[c.result.index, c] as const] : [])));
  const system: string[] = [];
  const prompt: LanguageModelV4Message[] = [];
  const decided: HistoryCall[] = [];
  let assistant: AssistantPart[] | undefined;
  let tool: ToolPart[] | undefined;
  // A call after a result starts the model's next step.
  let sawResult = false;
  // Decisions count only at the end of the conversation; one the user spoke after came too late
  // (its interaction is cancelled with the pause), so its call is abandoned like any other.
  const lastUser = messages.findLastIndex((m) => m.role === 'user');

  const flush = () => {
    if (assistant?.length) prompt.push({ role: 'assistant', content: assistant });
    if (tool?.length) prompt.push({ role: 'tool', content: tool });
    assistant = undefined;
    tool = undefined;
    sawResult = false;
  };

  messages.forEach((m, index) => {
    const call = callAt.get(index);
    if (call) {
      const isDecided = call.approval?.approved !== undefined;
      if (!call.result && (!isDecided || index < lastUser)) return;
      if (sawResult) flush();
      assistant ??= [];
      // The model read a failed call's arguments that were no object as `{}` in the turn that made it.
      assistant.push({ type: 'tool-call', toolCallId: call.toolCallId, toolName: call.toolName, input: isToolInput(call.input) ? call.input : {} });
      if (!call.result) decided.push(call);
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
        prompt.push({ role: 'user', content: [{ type: 'text', text: m.content }] });
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
  return { system, prompt, decided };
}
