import { closeSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type * as acp from '@agentclientprotocol/sdk';
import { pendingInteraction, type AgentEvent, type Usage } from '../contract/events.ts';
import { deniedResultText } from '../contract/tool-messages.ts';
import { AppError } from '../errors.ts';
import { EventQueue } from './event-queue.ts';
import { HarnessConnection, type ConnectionListener, type HarnessProcess } from './harness-connection.ts';
import { park, takeParked } from './parked.ts';

/** A gated tool call as the harness asks about it. */
export interface Gated {
  toolCallId: string;
  toolName: string;
  input: unknown;
  /** ACP's kind: `read`, `edit`, `execute`, `search`, `fetch`, `think`, `other`… */
  kind: string | undefined;
}

/**
 * What becomes of a gated call: run it, refuse it, or pause the turn for a person. A decision
 * recorded for the call a paused turn asked about names that call (`answers`): the harness asks
 * again under a new id after the pause, and the output tells it as the call that was paused.
 */
export type GateAnswer = { approved: boolean; answers?: string } | 'pause';

/** What one harness adds to the ACP protocol: how it names its tools and tells their input and output. */
export interface HarnessDialect {
  /** The tool's own name (`Write`), where the harness says it; the call's title otherwise. */
  toolName(call: ToolCallShape): string;
  /** The call's input without what the harness adds on each attempt (ids, times): what a recorded decision matches. */
  input?(raw: unknown): unknown;
  /** The call's result as the output tells it. */
  output?(raw: unknown): unknown;
  /** Text the harness says in the agent's voice that is its own notice, not the model's words: left out. */
  notice?(text: string): boolean;
}

export interface AcpTurnInput {
  turnId: string;
  process: HarnessProcess;
  /** The session folder: the harness's working directory. */
  cwd: string;
  /** Where the harness's own session id is kept between turns (in its state folder). */
  stateDir: string;
  /** The prompt, for a harness session that goes on (false) or one that starts anew (true). */
  prompt: (fresh: boolean) => string;
  mcpServers: acp.McpServer[];
  dialect: HarnessDialect;
  gate: (call: Gated) => GateAnswer;
  newInteractionId: () => string;
  signal: AbortSignal;
  /** How long the process may wait for the session's next turn, and how many may wait (parked.ts). */
  parking: { ttlMs: number; max: number };
  /**
   * Everything the harness read when it started (its command, environment, settings, instructions,
   * MCP servers): a parked process is reused only by a turn that would start it the same way.
   */
  fingerprint: string;
}

/** What the turn ended as: the harness's stop reason, or paused on the interactions it asked for. */
export interface AcpTurnEnd {
  paused: boolean;
  /** ACP's stop reason (`end_turn`, `max_tokens`, `cancelled`…). */
  stopReason: string;
  usage: Usage | undefined;
}

const SESSION_FILE = 'acp-session.json';

/**
 * One turn of a coding agent over the Agent Client Protocol: its process (the session's parked one,
 * or a new one), its session (loaded from the state folder when an earlier turn left one), the
 * prompt, and what the harness does, told as native events. A gate the policy cannot decide pauses
 * the turn: the prompt is cancelled and the process ends, and the harness's own session, written
 * down in its state folder, carries the conversation to the turn that continues it, in any process.
 */
export async function* runAcpTurn(input: AcpTurnInput): AsyncGenerator<AgentEvent, AcpTurnEnd> {
  const events = new EventQueue<AgentEvent>();
  const teller = new UpdateTeller(input, (event) => events.push(event));
  let connection = takeParked(input.stateDir, input.fingerprint);
  // A parked process has its fds already; the ones made for a new one go unused.
  if (connection) for (const fd of input.process.fds ?? []) closeSync(fd);
  let paused = false;
  let sessionId: string | undefined;
  const abort = () => void connection?.end();
  input.signal.addEventListener('abort', abort, { once: true });

  const listener: ConnectionListener = {
    permission: async (params) => {
      const call = teller.describe(params.toolCall);
      const answer = paused ? { approved: false } : input.gate(call);
      teller.tell(call.toolCallId, answer === 'pause' ? undefined : answer.answers);
      if (answer === 'pause') {
        paused = true;
        events.push({ type: 'interaction_request', data: pendingInteraction(input.newInteractionId(), 'user_approval', call) });
        if (sessionId) void connection?.agent.notify('session/cancel', { sessionId }).catch(() => undefined);
        return { outcome: { outcome: 'cancelled' } };
      }
      const kinds = answer.approved ? ['allow_once', 'allow_always'] : ['reject_once', 'reject_always'];
      const option = params.options.find((o) => o.kind === kinds[0]) ?? params.options.find((o) => o.kind === kinds[1]);
      if (!option) return { outcome: { outcome: 'cancelled' } };
      if (!answer.approved) teller.denied(call.toolCallId);
      return { outcome: { outcome: 'selected', optionId: option.optionId } };
    },
    update: (update) => teller.update(update),
  };

  // A process that dies mid-prompt ends the turn even if its connection never says so.
  let died!: () => void;
  const death = new Promise<{ ok: false; error: undefined }>((resolve) => (died = () => resolve({ ok: false, error: undefined })));
  const work = (async () => {
    connection ??= await HarnessConnection.start(input.process, input.cwd);
    if (input.signal.aborted) throw input.signal.reason;
    connection.listener = listener;
    void connection.exited.then(() => {
      events.close();
      died();
    });
    const opened = await connection.openSession(await harnessSession(input.stateDir), input.cwd, input.mcpServers);
    sessionId = opened.sessionId;
    if (opened.fresh) await saveSession(input.stateDir, sessionId);
    const response = await connection.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: input.prompt(opened.fresh) }] });
    const endedOnDenial = teller.end();
    await connection.closeSession(sessionId);
    // Reported by the harnesses here, though not yet in ACP's stable schema.
    const usage = (response as { usage?: { inputTokens: number; outputTokens: number; totalTokens: number } }).usage;
    // A turn the harness cancelled on a denial ended as the gate asked: the denial is its last word.
    const stopReason = response.stopReason === 'cancelled' && endedOnDenial ? 'end_turn' : response.stopReason;
    return { stopReason, usage: usage ? { input: usage.inputTokens, output: usage.outputTokens, total: usage.totalTokens } : undefined };
  })();
  const outcome = work.then(
    (end) => ({ ok: true as const, ...end }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  void outcome.then(() => events.close());

  let reusable = false;
  try {
    yield* events;
    const result = await Promise.race([outcome, death]);
    if (input.signal.aborted) throw input.signal.reason;
    if (!result.ok && !paused) throw harnessFailure(result.error, connection);
    reusable = result.ok && !paused;
    return { paused, stopReason: result.ok ? result.stopReason : 'cancelled', usage: result.ok ? result.usage : undefined };
  } finally {
    input.signal.removeEventListener('abort', abort);
    if (connection) {
      connection.listener = undefined;
      if (reusable) park(input.stateDir, input.fingerprint, connection, input.parking);
      else await connection.end();
    }
  }
}

function harnessFailure(error: unknown, connection: HarnessConnection | undefined): AppError {
  if (error instanceof AppError) return error;
  const detail = error instanceof Error ? error.message : 'the harness process ended before the turn did';
  const tail = connection?.stderrTail;
  return new AppError('upstream-error', `the harness failed: ${detail}${tail ? ` (${tail})` : ''}`, { cause: error });
}

/** The harness's own session id an earlier turn of this session left in its state folder. */
export async function harnessSession(stateDir: string): Promise<string | undefined> {
  try {
    return (JSON.parse(await readFile(path.join(stateDir, SESSION_FILE), 'utf8')) as { sessionId?: string }).sessionId;
  } catch {
    return undefined;
  }
}

async function saveSession(stateDir: string, sessionId: string): Promise<void> {
  await mkdir(stateDir, { recursive: true });
  await writeFile(path.join(stateDir, SESSION_FILE), JSON.stringify({ sessionId }));
}

type Update = acp.SessionNotification['update'];
export type ToolCallShape = { toolCallId: string; title?: string | null; kind?: string | null; rawInput?: unknown; _meta?: Record<string, unknown> | null };

/** A tool call of the turn; `id` is the one the output tells it under. */
interface Call {
  id: string;
  name: string;
  input: unknown;
  told: boolean;
  denied: boolean;
  done: boolean;
}

const hasInput = (input: unknown): boolean => input !== undefined && input !== null && !(typeof input === 'object' && Object.keys(input).length === 0);

/**
 * Turns `session/update`s into native events: text and thoughts as messages, a tool call once its
 * input is known (Claude's first `tool_call` has none; an update fills it in), its result when it
 * completes or fails.
 */
class UpdateTeller {
  readonly #input: AcpTurnInput;
  readonly #emit: (event: AgentEvent) => void;
  #open: { kind: 'message' | 'thought'; id: string } | undefined;
  #count = 0;
  readonly #calls = new Map<string, Call>();

  constructor(input: AcpTurnInput, emit: (event: AgentEvent) => void) {
    this.#input = input;
    this.#emit = emit;
  }

  update(update: Update): void {
    switch (update.sessionUpdate) {
      case 'agent_message_chunk':
      case 'agent_thought_chunk': {
        if (update.content.type !== 'text' || update.content.text === '' || this.#input.dialect.notice?.(update.content.text)) return;
        const kind = update.sessionUpdate === 'agent_message_chunk' ? 'message' : 'thought';
        if (this.#open?.kind !== kind) {
          this.#close();
          this.#open = { kind, id: `${this.#input.turnId}-m${++this.#count}` };
          this.#emit({ type: `${kind}_start`, data: { id: this.#open.id } });
        }
        this.#emit({ type: `${kind}_delta`, data: { id: this.#open.id, delta: update.content.text } });
        return;
      }
      case 'tool_call':
      case 'tool_call_update': {
        this.#close();
        this.#call(update);
        // Told once it runs, or when it is asked about: a call that was paused is told again under
        // the paused call's id (see GateAnswer), so it must not be told before the question.
        if (update.status === 'in_progress') this.tell(update.toolCallId);
        if (update.status === 'completed' || update.status === 'failed') {
          const output = update.rawOutput === undefined ? textOf(update.content) : (this.#input.dialect.output?.(update.rawOutput) ?? update.rawOutput);
          this.#result(update.toolCallId, update.status === 'failed', output);
        }
        return;
      }
      default:
        return;
    }
  }

  /** The call a permission request gates. */
  describe(toolCall: ToolCallShape): Gated {
    this.#close();
    const call = this.#call(toolCall);
    return { toolCallId: toolCall.toolCallId, toolName: call.name, input: call.input, kind: toolCall.kind ?? undefined };
  }

  /** Tells the call, once; as the call `as` when it answers one told before (then it is not told again). */
  tell(toolCallId: string, as?: string): void {
    const call = this.#calls.get(toolCallId);
    if (!call || call.told) return;
    call.told = true;
    if (as !== undefined) {
      call.id = as;
      return;
    }
    this.#emit({ type: 'tool_call', data: { id: toolCallId, name: call.name, input: call.input } });
  }

  denied(toolCallId: string): void {
    const call = this.#calls.get(toolCallId);
    if (call) call.denied = true;
  }

  /**
   * Ends the telling. A denied call the harness never answered gets its denial as its result:
   * Codex ends its whole turn on a denial. Says whether that is how this turn ended.
   */
  end(): boolean {
    this.#close();
    let endedOnDenial = false;
    for (const [id, call] of this.#calls) {
      if (!call.denied || call.done) continue;
      this.#result(id, true, deniedResultText());
      endedOnDenial = true;
    }
    return endedOnDenial;
  }

  #call(update: ToolCallShape): Call {
    let call = this.#calls.get(update.toolCallId);
    if (!call) this.#calls.set(update.toolCallId, (call = { id: update.toolCallId, name: this.#input.dialect.toolName(update), input: {}, told: false, denied: false, done: false }));
    if (hasInput(update.rawInput)) call.input = this.#input.dialect.input?.(update.rawInput) ?? update.rawInput;
    return call;
  }

  #result(toolCallId: string, failed: boolean, output: unknown): void {
    this.tell(toolCallId);
    const call = this.#calls.get(toolCallId)!;
    if (call.done) return;
    call.done = true;
    this.#emit({ type: 'tool_result', data: { id: call.id, output: output ?? '', is_error: failed, ...(call.denied ? { denied: true } : {}) } });
  }

  #close(): void {
    if (!this.#open) return;
    this.#emit({ type: `${this.#open.kind}_end`, data: { id: this.#open.id } });
    this.#open = undefined;
  }
}

function textOf(content: unknown): string | undefined {
  if (!Array.isArray(content)) return undefined;
  const texts = content.flatMap((c: { type?: string; content?: { type?: string; text?: string } }) => (c.type === 'content' && c.content?.type === 'text' ? [c.content.text ?? ''] : []));
  return texts.length ? texts.join('\n') : undefined;
}
