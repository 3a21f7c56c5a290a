import { isStepCount, jsonSchema, tool, type LanguageModel, type Tool, type ToolApprovalStatus, type ToolSet } from 'ai';
import { modelParts } from './model-parts.ts';
import type { Config } from '../config.ts';
import { doneEvent, pendingInteraction, type AgentEvent, type EventOf, type PendingInteraction, type StopReason, type Usage } from '../contract/events.ts';
import type { Message } from '../contract/messages.ts';
import { gateFor } from './permissions.ts';
import { collectCalls, toModelMessages } from './history.ts';
import { toModelError } from './model-errors.ts';
import { providerOptionsFor } from './model.ts';
import type { RunnableTemplate } from './template.ts';
import { builtinTools, READ_TOOLS } from './tools/index.ts';
import type { Pricing } from './pricing.ts';
import type { McpTools } from './mcp.ts';
import { deniedResultText } from '../contract/tool-messages.ts';

export interface TurnInput {
  turnId: string;
  sessionId: string;
  traceId: string;
  template: RunnableTemplate;
  /** The validated native history, approvals already checked against the store. */
  history: Message[];
  workdir: string;
  /** More for the instructions, from what the turn set up (the skills it installed). */
  notes?: string[];
  /** Tools of the template's MCP servers, connected by the caller (who also closes them). */
  mcp?: Pick<McpTools, 'tools' | 'readOnly' | 'permissions'> | undefined;
  model: LanguageModel;
  config: Pick<Config, 'maxSteps' | 'modelTimeoutMs' | 'modelMaxRetries' | 'bash'>;
  pricing?: Pricing | undefined;
  signal: AbortSignal;
  newInteractionId: () => string;
  /**
   * Whether anyone reads the turn as it is written. False (a JSON reply, an evaluation case) makes
   * one non-streaming model call per step, which costs far less CPU; the events are the same.
   */
  streaming: boolean;
}

function buildTools(input: TurnInput): ToolSet {
  const { template } = input;
  const builtins = builtinTools({ root: input.workdir, bash: input.config.bash, network: template.sandbox.permissions.network.mode });
  const tools: ToolSet = {};
  for (const entry of template.tools) {
    if (entry.type === 'builtin') {
      tools[entry.name] = builtins[entry.name] as Tool;
    } else {
      // No execute: the SDK ends the step with the call unanswered, and the caller fulfils it.
      tools[entry.name] = tool({
        ...(entry.description ? { description: entry.description } : {}),
        inputSchema: jsonSchema(entry.input_schema ?? { type: 'object', additionalProperties: true }),
      }) as Tool;
    }
  }
  Object.assign(tools, input.mcp?.tools);
  return tools;
}

function instructionsFor(input: TurnInput, system: string[]): string {
  return [
    input.template.instructions.agents_md,
    `Your working folder is ${input.workdir}. File tools take paths relative to it; nothing outside it can be reached.`,
    ...(input.notes ?? []),
    ...system,
  ].join('\n\n');
}

function errorText(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === 'string' ? error : JSON.stringify(error);
}

/**
 * One agent turn as a stream of native events. It knows nothing of HTTP or storage: the caller
 * persists what it needs from the events (interaction records, the folded output).
 */
export async function* runTurn(input: TurnInput): AsyncGenerator<AgentEvent, void, undefined> {
  const { template } = input;
  yield { type: 'turn_start', data: { turn_id: input.turnId, session_id: input.sessionId, trace_id: input.traceId } };

  const { calls } = collectCalls(input.history);
  const { system, messages } = toModelMessages(input.history, calls);
  const tools = buildTools(input);
  const entries = new Map(template.tools.map((t) => [t.name, t]));
  const mode = template.runner.permissions.default;
  const deniedReasons = new Map<string, string>();
  // A denial re-posted in band reaches the SDK as history, and its tool-output-denied part carries
  // no reason; without this the caller's own reason would vanish from the turn's output.
  for (const call of calls) {
    if (call.approval?.approved === false && call.approval.reason && !call.result) deniedReasons.set(call.toolCallId, call.approval.reason);
  }

  const toolApproval = ({ toolCall }: { toolCall: { toolName: string; toolCallId: string } }): ToolApprovalStatus => {
    const entry = entries.get(toolCall.toolName);
    const mcp = input.mcp;
    const gate = entry
      ? gateFor(entry, mode, READ_TOOLS.has(toolCall.toolName))
      : gateFor({ permission: mcp?.permissions.get(toolCall.toolName) }, mode, mcp?.readOnly.has(toolCall.toolName) ?? false);
    if (gate === 'deny') {
      const reason = `the tool "${toolCall.toolName}" is not permitted for this agent`;
      deniedReasons.set(toolCall.toolCallId, reason);
      return { type: 'denied', reason };
    }
    if (entry?.type === 'client') return 'not-applicable';
    return gate === 'ask' ? 'user-approval' : 'not-applicable';
  };

  const maxSteps = template.runner.max_steps ?? input.config.maxSteps;
  const call = {
    model: input.model,
    instructions: instructionsFor(input, system),
    messages,
    tools,
    toolApproval,
    stopWhen: isStepCount(maxSteps),
    maxRetries: input.config.modelMaxRetries,
    abortSignal: input.signal,
    providerOptions: providerOptionsFor(template.llm) as never,
  };
  const parts = () => modelParts(call, { streaming: input.streaming, timeoutMs: input.config.modelTimeoutMs });

  const textIds = new Map<string, string>();
  let textCount = 0;
  const messageId = (sdkId: string, fresh: boolean) => {
    if (fresh || !textIds.has(sdkId)) textIds.set(sdkId, `${input.turnId}-m${++textCount}`);
    return textIds.get(sdkId)!;
  };
  const pending: PendingInteraction[] = [];
  const unanswered = new Map<string, { name: string; input: unknown }>();
  let finishReason: string | undefined;
  let steps = 0;
  let lastStepHadCalls = false;
  const usage: Usage = { input: 0, output: 0, total: 0 };
  // A continuation's answered calls settle before its first step: denials at once, approved calls
  // as they finish. They are told in the order the calls were made, as the model will read them,
  // so the output does not depend on which tool was quicker.
  const callOrder = new Map(calls.map((c, i) => [c.toolCallId, i]));
  let settling: Array<EventOf<'tool_result'>> | undefined = [];
  const settled = function* () {
    const results = settling ?? [];
    settling = undefined;
    yield* results.sort((a, b) => (callOrder.get(a.data.id) ?? 0) - (callOrder.get(b.data.id) ?? 0));
  };
  const toldResult = function* (event: EventOf<'tool_result'>) {
    if (settling) settling.push(event);
    else yield event;
  };

  try {
    for await (const part of parts()) {
      switch (part.type) {
        case 'text-start':
          yield { type: 'message_start', data: { id: messageId(part.id, true) } };
          break;
        case 'text-delta':
          if (part.text) yield { type: 'message_delta', data: { id: messageId(part.id, false), delta: part.text } };
          break;
        case 'text-end':
          yield { type: 'message_end', data: { id: messageId(part.id, false) } };
          break;
        case 'reasoning-start':
          yield { type: 'thought_start', data: { id: messageId(part.id, true) } };
          break;
        case 'reasoning-delta':
          if (part.text) yield { type: 'thought_delta', data: { id: messageId(part.id, false), delta: part.text } };
          break;
        case 'reasoning-end':
          yield { type: 'thought_end', data: { id: messageId(part.id, false) } };
          break;
        case 'tool-call':
          lastStepHadCalls = true;
          unanswered.set(part.toolCallId, { name: part.toolName, input: part.input });
          yield { type: 'tool_call', data: { id: part.toolCallId, name: part.toolName, input: part.input } };
          break;
        case 'tool-result':
          unanswered.delete(part.toolCallId);
          yield* toldResult({ type: 'tool_result', data: { id: part.toolCallId, output: part.output, is_error: false } });
          break;
        case 'tool-error':
          unanswered.delete(part.toolCallId);
          yield* toldResult({ type: 'tool_result', data: { id: part.toolCallId, output: errorText(part.error), is_error: true } });
          break;
        case 'tool-approval-response':
          if (!part.approved && part.reason) deniedReasons.set(part.toolCall.toolCallId, part.reason);
          break;
        case 'tool-output-denied': {
          unanswered.delete(part.toolCallId);
          yield* toldResult({ type: 'tool_result', data: { id: part.toolCallId, output: deniedResultText(deniedReasons.get(part.toolCallId)), is_error: true, denied: true } });
          break;
        }
        case 'tool-approval-request': {
          if (part.isAutomatic) break;
          unanswered.delete(part.toolCall.toolCallId);
          const interaction = pendingInteraction(input.newInteractionId(), 'user_approval', part.toolCall);
          pending.push(interaction);
          yield { type: 'interaction_request', data: interaction };
          break;
        }
        case 'start-step':
          yield* settled();
          steps++;
          lastStepHadCalls = false;
          break;
        case 'finish-step':
          usage.input += part.usage.inputTokens ?? 0;
          usage.output += part.usage.outputTokens ?? 0;
          usage.total += part.usage.totalTokens ?? (part.usage.inputTokens ?? 0) + (part.usage.outputTokens ?? 0);
          break;
        case 'finish':
          finishReason = part.finishReason;
          break;
        case 'error':
          throw part.error;
        case 'abort':
          throw input.signal.reason ?? new Error('the turn was aborted');
        default:
          break;
      }
    }
  } catch (error) {
    // Tools that ran before the failure are part of what the turn did.
    yield* settled();
    if (input.signal.aborted) throw input.signal.reason ?? error;
    throw toModelError(error);
  }
  yield* settled();

  // Calls left without a result or an approval request belong to client tools: the caller runs them.
  for (const [toolCallId, call] of unanswered) {
    if (entries.get(call.name)?.type !== 'client') continue;
    const interaction = pendingInteraction(input.newInteractionId(), 'client_tool', { toolCallId, toolName: call.name, input: call.input });
    pending.push(interaction);
    yield { type: 'interaction_request', data: interaction };
  }

  const cost = input.pricing?.(template.llm.provider, template.llm.model, usage);
  yield { type: 'usage', data: cost === undefined ? usage : { ...usage, cost } };

  let stopReason: StopReason = 'end_turn';
  if (pending.length) stopReason = 'paused';
  else if (finishReason === 'length') stopReason = 'max_tokens';
  else if (lastStepHadCalls && steps >= maxSteps) stopReason = 'max_steps';
  yield doneEvent(stopReason, pending[0]);
}
