import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4Message } from '@ai-sdk/provider';
import { jsonSchema, tool } from '@ai-sdk/provider-utils';
import type { Tool, ToolSet } from 'ai';
import type { Config } from '../config.ts';
import { doneEvent, pendingInteraction, type AgentEvent, type PendingInteraction, type StopReason, type Usage } from '../contract/events.ts';
import type { Message } from '../contract/messages.ts';
import { deniedResultText } from '../contract/tool-messages.ts';
import { collectCalls, toPrompt, type HistoryCall } from './history.ts';
import type { McpTools } from './mcp.ts';
import { toModelError } from './model-errors.ts';
import { modelCall } from './model-call.ts';
import { errorMessage, modelOutput, modelTools, parseCall, runTool, validateInput, type ParsedCall, type ToolOutcome } from './model-tools.ts';
import { providerOptionsFor } from './model.ts';
import { gateFor, type Gate } from './permissions.ts';
import type { Pricing } from './pricing.ts';
import type { RunnableTemplate } from './template.ts';
import { makeRedactor } from '../telemetry/redact.ts';
import { builtinTools, READ_TOOLS } from './tools/index.ts';

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
  model: LanguageModelV4;
  config: Pick<Config, 'maxSteps' | 'modelTimeoutMs' | 'modelMaxRetries' | 'bash'>;
  pricing?: Pricing | undefined;
  signal: AbortSignal;
  newInteractionId: () => string;
  /**
   * Whether anyone reads the turn as it is written. False (a JSON reply, an evaluation case) makes
   * one non-streaming model call per step, which costs far less CPU; the events are the same.
   */
  streaming: boolean;
  /**
   * The run's secret values (the request's `secrets` and `credentials`, the provider keys). A
   * tool runs on the input its `tool_call` event shows, where they are masked: a secret that a
   * model repeats into a call never lands in a file, a command or a server's request.
   */
  secretValues?: ReadonlyArray<string | undefined>;
}

function buildTools(input: TurnInput): ToolSet {
  const { template } = input;
  const builtins = builtinTools({ root: input.workdir, bash: input.config.bash, network: template.sandbox.permissions.network.mode });
  // No prototype: a client tool may be named `__proto__`, which on a plain object would set the
  // prototype instead of adding the tool.
  const tools: ToolSet = Object.create(null);
  for (const entry of template.tools) {
    if (entry.type === 'builtin') {
      tools[entry.name] = builtins[entry.name] as Tool;
    } else {
      // No execute: the call waits for the caller, who runs it.
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
  const extras = input.template.harness.extras;
  return [
    input.template.instructions.agents_md,
    extras?.system ?? `Your working folder is ${input.workdir}. File tools take paths relative to it; nothing outside it can be reached.`,
    ...(extras?.append_system ? [extras.append_system] : []),
    ...(input.notes ?? []),
    ...system,
  ].join('\n\n');
}

type AssistantPart = Extract<LanguageModelV4Message, { role: 'assistant' }>['content'][number];
type ToolPart = Extract<LanguageModelV4Message, { role: 'tool' }>['content'][number];

/** A text or reasoning part of a step's answer, as it streams. */
interface OpenPart {
  /** The turn's id for it, as its events carry it. */
  id: string;
  kind: 'text' | 'reasoning';
  part: Extract<AssistantPart, { type: 'text' | 'reasoning' }>;
  ended: boolean;
}

function ended(entry: OpenPart): AgentEvent {
  entry.ended = true;
  return { type: entry.kind === 'text' ? 'message_end' : 'thought_end', data: { id: entry.id } };
}

/** A call of a step and what becomes of it. */
interface StepCall {
  call: ParsedCall;
  /** Running, or run: its outcome. */
  outcome?: Promise<ToolOutcome>;
  /** Refused by the gate (`deny`), or by the caller: why. */
  denied?: { reason: string | undefined };
  /** Waits for a person (approval) or for the caller (a client tool). */
  waits?: PendingInteraction['kind'];
}

/**
 * One agent turn as a stream of native events. It knows nothing of HTTP or storage: the caller
 * persists what it needs from the events (interaction records, the folded output).
 *
 * The step loop is agentd's own, over the provider's model interface (`doGenerate`/`doStream`):
 * agentd owns approvals, tools, the event stream and every projection of it, so the AI SDK's
 * `generateText`/`streamText` would add their cost and nothing this uses (BENCHMARKS.md). The
 * providers stay the AI SDK's: request building, response parsing, every protocol.
 */
export async function* runTurn(input: TurnInput): AsyncGenerator<AgentEvent, void, undefined> {
  const { template, signal } = input;
  yield { type: 'turn_start', data: { turn_id: input.turnId, session_id: input.sessionId, trace_id: input.traceId } };

  const { calls } = collectCalls(input.history);
  /**
   * The conversation's call ids, each unique. Some servers number their calls afresh in every
   * answer (`call_0`, `list_dir:0`), give two calls of one answer the same id, or none: a call
   * whose id is taken (or empty) gets a fresh one, used from then on, so the conversation the
   * caller posts back never holds two calls of one id.
   */
  const callIds = new Set(calls.map((c) => c.toolCallId));
  const uniqueCallId = (id: string): string => {
    const base = id || `call-${input.turnId}`;
    let unique = base;
    for (let n = 2; callIds.has(unique); n++) unique = `${base}-${n}`;
    callIds.add(unique);
    return unique;
  };
  const { system, prompt, decided } = toPrompt(input.history, calls);
  const tools = buildTools(input);
  const masked = makeRedactor(input.secretValues ?? []);
  const entries = new Map(template.tools.map((t) => [t.name, t]));
  const mode = template.runner.permissions.default;
  const gateOf = (toolName: string): Gate => {
    const entry = entries.get(toolName);
    if (entry) return gateFor(entry, mode, READ_TOOLS.has(toolName));
    const mcp = input.mcp;
    return gateFor({ permission: mcp?.permissions.get(toolName) }, mode, mcp?.readOnly.has(toolName) ?? false);
  };
  const notPermitted = (toolName: string) => `the tool "${toolName}" is not permitted for this agent`;

  const messages: LanguageModelV4Message[] = [{ role: 'system', content: instructionsFor(input, system) }, ...prompt];
  const functionTools = await modelTools(tools);
  const options: LanguageModelV4CallOptions = {
    prompt: messages,
    ...(functionTools.length ? { tools: functionTools, toolChoice: { type: 'auto' } } : {}),
    providerOptions: providerOptionsFor(template.llm) as LanguageModelV4CallOptions['providerOptions'],
    abortSignal: signal,
  };
  const settings = { streaming: input.streaming, timeoutMs: input.config.modelTimeoutMs, maxRetries: input.config.modelMaxRetries };
  const maxSteps = template.runner.max_steps ?? input.config.maxSteps;

  let textCount = 0;
  const pending: PendingInteraction[] = [];
  let finishReason: string | undefined;
  let steps = 0;
  let lastStepHadCalls = false;
  const usage: Usage = { input: 0, output: 0, total: 0 };
  /** Model calls that finished: a turn that fails or is cancelled after one still reports what they used. */
  let finishedCalls = 0;
  const usageEvent = (): AgentEvent => {
    const cost = input.pricing?.(template.llm.provider, template.llm.model, usage);
    return { type: 'usage', data: cost === undefined ? usage : { ...usage, cost } };
  };

  /** Outcomes told in the order the calls were made, as the model reads them, whichever finished first. */
  async function* told(stepCalls: StepCall[]): AsyncGenerator<AgentEvent, ToolPart[]> {
    const content: ToolPart[] = [];
    for (const { call, outcome, denied } of stepCalls) {
      const ids = { toolCallId: call.toolCallId, toolName: call.toolName };
      if (denied) {
        content.push({ type: 'tool-result', ...ids, output: { type: 'execution-denied', ...(denied.reason ? { reason: denied.reason } : {}) } });
        yield { type: 'tool_result', data: { id: call.toolCallId, output: deniedResultText(denied.reason), is_error: true, denied: true } };
        continue;
      }
      if (!outcome) continue;
      const done = await outcome;
      // Masked as the stream and the stored turn are: a tool that echoes a secret (an MCP server
      // repeating its token, a file holding a key) must not hand it to the model either.
      content.push({ type: 'tool-result', ...ids, output: masked(modelOutput(done)) });
      yield { type: 'tool_result', data: done.ok ? { id: call.toolCallId, output: done.output, is_error: false } : { id: call.toolCallId, output: errorMessage(done.error), is_error: true } };
    }
    return content;
  }

  /** The continued calls the caller decided on: run (if the gate still lets them) or refused. */
  const settle = async (call: HistoryCall): Promise<StepCall> => {
    const parsed: ParsedCall = { toolCallId: call.toolCallId, toolName: call.toolName, input: call.input };
    if (!call.approval?.approved) return { call: parsed, denied: { reason: call.approval?.reason } };
    if (gateOf(call.toolName) === 'deny') return { call: parsed, denied: { reason: notPermitted(call.toolName) } };
    const tool = Object.hasOwn(tools, call.toolName) ? tools[call.toolName] : undefined;
    if (!tool?.execute) return { call: parsed, outcome: Promise.resolve({ ok: false, error: new Error(`the tool "${call.toolName}" is not available to this agent`) }) };
    const checked = await validateInput(tool, call.toolName, call.input);
    if ('invalid' in checked) return { call: parsed, outcome: Promise.resolve({ ok: false, error: checked.invalid }) };
    return { call: parsed, outcome: runTool(tool, { toolCallId: call.toolCallId, input: checked.input }, signal) };
  };

  /** A call the model just made: refused, waiting, or started at once (while the model goes on). */
  const start = (call: ParsedCall): StepCall => {
    if (call.invalid) return { call, outcome: Promise.resolve({ ok: false, error: call.invalid }) };
    const gate = gateOf(call.toolName);
    if (gate === 'deny') return { call, denied: { reason: notPermitted(call.toolName) } };
    if (entries.get(call.toolName)?.type === 'client') return { call, waits: 'client_tool' };
    if (gate === 'ask') return { call, waits: 'user_approval' };
    return { call, outcome: runTool(tools[call.toolName]!, { ...call, input: masked(call.input) }, signal) };
  };

  /** The calls of the step under way, until their outcomes are told. */
  let untold: StepCall[] = [];

  try {
    if (decided.length) {
      const content = yield* told(await Promise.all(decided.map(settle)));
      const last = messages.at(-1);
      if (last?.role === 'tool') last.content.push(...content);
      else messages.push({ role: 'tool', content });
    }

    for (;;) {
      signal.throwIfAborted();
      steps++;
      const assistant: AssistantPart[] = [];
      const stepCalls: StepCall[] = [];
      untold = stepCalls;
      // Text and reasoning as they stream, keyed by kind and the provider's id; the message ids are
      // the turn's own, fresh for every part, since providers reuse theirs from step to step.
      const open = new Map<string, OpenPart>();
      const opened = (kind: OpenPart['kind'], key: string) => {
        const known = open.get(key);
        if (known && !known.ended) return { entry: known, fresh: false };
        // A delta after its part ended (or with no start) begins another part.
        const entry: OpenPart = { id: `${input.turnId}-m${++textCount}`, kind, part: { type: kind, text: '' }, ended: false };
        open.set(key, entry);
        assistant.push(entry.part);
        return { entry, fresh: true };
      };
      for await (const part of modelCall(input.model, options, settings)) {
        switch (part.type) {
          case 'text-start':
          case 'reasoning-start': {
            const kind = part.type === 'text-start' ? 'text' : 'reasoning';
            const before = open.get(`${kind}:${part.id}`);
            // A part started again while still open is another part: the first one ends here.
            if (before && !before.ended) yield ended(before);
            const { entry } = opened(kind, `${kind}:${part.id}`);
            if (part.providerMetadata) entry.part.providerOptions = part.providerMetadata;
            yield { type: kind === 'text' ? 'message_start' : 'thought_start', data: { id: entry.id } };
            break;
          }
          case 'text-delta':
          case 'reasoning-delta': {
            const kind = part.type === 'text-delta' ? 'text' : 'reasoning';
            const { entry, fresh } = opened(kind, `${kind}:${part.id}`);
            if (fresh) yield { type: kind === 'text' ? 'message_start' : 'thought_start', data: { id: entry.id } };
            if (part.providerMetadata) entry.part.providerOptions = part.providerMetadata;
            entry.part.text += part.delta;
            if (part.delta) yield { type: kind === 'text' ? 'message_delta' : 'thought_delta', data: { id: entry.id, delta: part.delta } };
            break;
          }
          case 'text-end':
          case 'reasoning-end': {
            const kind = part.type === 'text-end' ? 'text' : 'reasoning';
            const entry = open.get(`${kind}:${part.id}`);
            if (!entry || entry.ended) break;
            if (part.providerMetadata) entry.part.providerOptions = part.providerMetadata;
            yield ended(entry);
            break;
          }
          case 'tool-call': {
            // Tools the provider runs itself are none of agentd's: it gives no model any.
            if (part.providerExecuted) break;
            const call = await parseCall({ ...part, toolCallId: uniqueCallId(part.toolCallId) }, tools);
            assistant.push({
              type: 'tool-call',
              toolCallId: call.toolCallId,
              toolName: call.toolName,
              input: call.invalid && (typeof call.input !== 'object' || call.input === null) ? {} : call.input,
              ...(part.providerMetadata ? { providerOptions: part.providerMetadata } : {}),
            });
            yield { type: 'tool_call', data: { id: call.toolCallId, name: call.toolName, input: call.input } };
            const started = start(call);
            stepCalls.push(started);
            if (started.waits === 'user_approval') {
              const interaction = pendingInteraction(input.newInteractionId(), 'user_approval', call);
              pending.push(interaction);
              yield { type: 'interaction_request', data: interaction };
            }
            break;
          }
          case 'finish':
            finishedCalls++;
            finishReason = part.finishReason.unified;
            usage.input += part.usage.inputTokens.total ?? 0;
            usage.output += part.usage.outputTokens.total ?? 0;
            usage.total += (part.usage.inputTokens.total ?? 0) + (part.usage.outputTokens.total ?? 0);
            break;
          case 'error':
            throw part.error;
          default:
            break;
        }
      }

      // A server that never ends a part (a Responses server that sends its text deltas and no
      // item events) leaves it open: it ends with the answer, so every start has its end.
      for (const entry of open.values()) if (!entry.ended) yield ended(entry);

      untold = [];
      const content = yield* told(stepCalls);
      const said = assistant.filter((p) => p.type !== 'text' || p.text !== '' || p.providerOptions);
      if (said.length) messages.push({ role: 'assistant', content: said });
      if (content.length) messages.push({ role: 'tool', content });

      lastStepHadCalls = stepCalls.length > 0;
      const waiting = stepCalls.filter((c) => c.waits);
      if (waiting.length || !lastStepHadCalls || steps >= maxSteps) {
        // Client tools wait for the caller, who runs them and posts their results.
        for (const { call, waits } of waiting) {
          if (waits !== 'client_tool') continue;
          const interaction = pendingInteraction(input.newInteractionId(), 'client_tool', call);
          pending.push(interaction);
          yield { type: 'interaction_request', data: interaction };
        }
        break;
      }
    }
  } catch (error) {
    // Calls the model made before its answer broke off were started at once: they have run (or
    // run now, within their own limits). What they did is told, and kept with the turn, rather
    // than a call the record shows without the result its side effects had.
    if (untold.length && !signal.aborted) yield* told(untold);
    // The tokens already spent are told, before the caller's error and `done`.
    if (finishedCalls > 0) yield usageEvent();
    if (signal.aborted) throw signal.reason ?? error;
    throw toModelError(error);
  }

  yield usageEvent();

  let stopReason: StopReason = 'end_turn';
  if (pending.length) stopReason = 'paused';
  else if (finishReason === 'length') stopReason = 'max_tokens';
  else if (lastStepHadCalls && steps >= maxSteps) stopReason = 'max_steps';
  yield doneEvent(stopReason, pending[0]);
}
