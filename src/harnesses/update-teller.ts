import type * as acp from '@agentclientprotocol/sdk';
import type { AgentEvent } from '../contract/events.ts';
import { deniedResultText } from '../contract/tool-messages.ts';
import { canonical } from './canonical.ts';

/** A gated tool call as the harness asks about it. */
export interface Gated {
  toolCallId: string;
  toolName: string;
  input: unknown;
  /** ACP's kind: `read`, `edit`, `execute`, `search`, `fetch`, `think`, `other`… */
  kind: string | undefined;
}

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
  /**
   * It asks about a call after telling it has started (Pi's gate runs inside the call): while
   * anything is gated, a call is told when it is asked about or ends, not when it starts.
   */
  asksAfterStart?: boolean;
  /**
   * It asks about a step's calls together, in any order, and a question answered `cancelled` ends
   * every call of its turn, one approved a moment before included (Codex): a paused turn answers
   * its questions once the calls approved for it have ended.
   */
  asksTogether?: boolean;
}

type Update = acp.SessionNotification['update'];

/** What the teller needs of its turn: the ids it makes messages from, the harness's dialect, whether anything is gated. */
export interface TellerInput {
  turnId: string;
  dialect: HarnessDialect;
  /** Whether any call may be asked about (the mode is not `allow`, or a tool entry asks or denies). */
  gated: boolean;
}

/** A tool call as ACP's `tool_call`, its updates and a permission request tell it. */
export type ToolCallShape = { toolCallId: string; title?: string | null; kind?: string | null; rawInput?: unknown; _meta?: Record<string, unknown> | null };

/** A tool call of the turn; `id` is the one the output tells it under. */
interface Call {
  id: string;
  name: string;
  input: unknown;
  /** ACP's kind, as the harness first told it. */
  kind: string | undefined;
  /** What a command wrote, where the harness streams it as terminal output (Zed's `_meta.terminal_output`), and its exit code. */
  terminal: { output: string; exitCode?: unknown };
  told: boolean;
  denied: boolean;
  /** Approved by the gate in this turn: it runs, and its result belongs to the turn. */
  approved: boolean;
  done: boolean;
}

const hasInput = (input: unknown): boolean => input !== undefined && input !== null && !(typeof input === 'object' && Object.keys(input).length === 0);

/**
 * Turns `session/update`s into native events: text and thoughts as messages, a tool call once its
 * input is known (Claude's first `tool_call` has none; an update fills it in), its result when it
 * completes or fails.
 */
export class UpdateTeller {
  readonly #input: TellerInput;
  readonly #emit: (event: AgentEvent) => void;
  #open: { kind: 'message' | 'thought'; id: string } | undefined;
  #count = 0;
  readonly #calls = new Map<string, Call>();
  /** Questions asked about calls whose updates have not come yet, by the harness's own id for the question. */
  readonly #questions = new Set<Call>();
  #stopped = false;
  /** Paused, and waiting for the calls approved before the pause to end (stopWhenSettled). */
  #settling: (() => void) | undefined;

  constructor(input: TellerInput, emit: (event: AgentEvent) => void) {
    this.#input = input;
    this.#emit = emit;
  }

  update(update: Update): void {
    if (this.#stopped) return;
    if (this.#settling && !this.#runsApproved(update)) return;
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
        const call = this.#call(update);
        const terminal = update._meta as { terminal_output?: { data?: unknown }; terminal_exit?: { exit_code?: unknown } } | null | undefined;
        if (typeof terminal?.terminal_output?.data === 'string') call.terminal.output += terminal.terminal_output.data;
        if (terminal?.terminal_exit) call.terminal.exitCode = terminal.terminal_exit.exit_code;
        // Told once it runs, or when it is asked about: a call that was paused is told again under
        // the paused call's id (see GateAnswer), so it must not be told before the question.
        if (update.status === 'in_progress' && !(this.#input.gated && this.#input.dialect.asksAfterStart)) this.tell(update.toolCallId);
        if (update.status === 'completed' || update.status === 'failed') {
          const output = update.rawOutput === undefined ? (textOf(update.content) ?? terminalOutput(call)) : (this.#input.dialect.output?.(update.rawOutput) ?? update.rawOutput);
          this.#result(update.toolCallId, update.status === 'failed', output);
        }
        return;
      }
      default:
        return;
    }
  }

  /**
   * The call a permission request gates. A harness that asks under an id of its own (Pi's
   * extension UI) asks about the untold call of the same tool and input; if that call's updates
   * have not come yet (pi-acp sends them on another path, so the question may overtake them), the
   * question stands for it, and the call is joined to it when they come.
   */
  describe(toolCall: ToolCallShape): Gated {
    this.#close();
    const known = this.#calls.get(toolCall.toolCallId);
    if (known) return gated(toolCall.toolCallId, known);
    const question = this.#newCall(toolCall);
    const found = this.#untold(question);
    if (found) return gated(...found);
    this.#questions.add(question);
    this.#calls.set(toolCall.toolCallId, question);
    return gated(toolCall.toolCallId, question);
  }

  #untold(like: Call): [string, Call] | undefined {
    const input = canonical(like.input);
    return [...this.#calls].find(([, call]) => call !== like && !call.told && !call.done && call.name === like.name && canonical(call.input) === input);
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

  approved(toolCallId: string): void {
    const call = this.#calls.get(toolCallId);
    if (call) call.approved = true;
  }

  /**
   * The turn paused: tells nothing more but the results of calls approved before the pause that
   * still run, for up to `limitMs`, then nothing at all. A harness asks about its next call while
   * the one approved before it runs; cancelled at once, that call's result would be lost while its
   * approval was spent. What the harness does as it is cancelled (the paused call failing, Pi's
   * "Operation aborted") is not part of the turn. The calls decided for the turn that the harness
   * has yet to ask about may still come to run until `asked` settles.
   */
  async stopWhenSettled(limitMs: number, asked: Promise<void>): Promise<void> {
    this.#close();
    let allAsked = false;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, limitMs);
      this.#settling = () => {
        if (allAsked && !this.#running()) (clearTimeout(timer), resolve());
      };
      void asked.then(() => {
        allAsked = true;
        this.#settling?.();
      });
    });
    this.#settling = undefined;
    this.#stopped = true;
  }

  #running(): boolean {
    return [...this.#calls.values()].some((call) => call.approved && !call.done);
  }

  #runsApproved(update: Update): boolean {
    if (update.sessionUpdate !== 'tool_call' && update.sessionUpdate !== 'tool_call_update') return false;
    const call = this.#calls.get(update.toolCallId);
    return call !== undefined && call.approved && !call.done;
  }

  /**
   * Ends the telling. A denied call the harness never answered gets its denial as its result:
   * Codex ends its whole turn on a denial. Says whether that is how this turn ended.
   */
  end(): boolean {
    this.#close();
    let endedOnDenial = false;
    if (this.#stopped) return endedOnDenial;
    for (const [id, call] of this.#calls) {
      if (!call.denied || call.done) continue;
      this.#result(id, true, deniedResultText());
      endedOnDenial = true;
    }
    return endedOnDenial;
  }

  #call(update: ToolCallShape): Call {
    let call = this.#calls.get(update.toolCallId);
    if (!call) this.#calls.set(update.toolCallId, (call = this.#newCall(update)));
    else {
      this.#questions.delete(call);
      if (hasInput(update.rawInput)) call.input = this.#input.dialect.input?.(update.rawInput) ?? update.rawInput;
    }
    const asked = this.#questionFor(call);
    if (asked) {
      this.#questions.delete(asked);
      asked.kind ??= call.kind;
      this.#calls.set(update.toolCallId, asked);
      return asked;
    }
    return call;
  }

  #newCall(update: ToolCallShape): Call {
    const input = hasInput(update.rawInput) ? (this.#input.dialect.input?.(update.rawInput) ?? update.rawInput) : {};
    return { id: update.toolCallId, name: this.#input.dialect.toolName(update), input, kind: update.kind ?? undefined, terminal: { output: '' }, told: false, denied: false, approved: false, done: false };
  }

  /** The question asked ahead of this call's updates about the same tool and input, if one was. */
  #questionFor(call: Call): Call | undefined {
    if (this.#questions.size === 0 || this.#questions.has(call)) return undefined;
    const input = canonical(call.input);
    return [...this.#questions].find((q) => q.name === call.name && canonical(q.input) === input);
  }

  #result(toolCallId: string, failed: boolean, output: unknown): void {
    this.tell(toolCallId);
    const call = this.#calls.get(toolCallId)!;
    if (call.done) return;
    call.done = true;
    this.#emit({ type: 'tool_result', data: { id: call.id, output: output ?? '', is_error: failed, ...(call.denied ? { denied: true } : {}) } });
    if (this.#settling && !this.#running()) this.#settling();
  }

  #close(): void {
    if (!this.#open) return;
    this.#emit({ type: `${this.#open.kind}_end`, data: { id: this.#open.id } });
    this.#open = undefined;
  }
}

function gated(toolCallId: string, call: Call): Gated {
  return { toolCallId, toolName: call.name, input: call.input, kind: call.kind };
}

function terminalOutput(call: Call): unknown {
  const { output, exitCode } = call.terminal;
  return output === '' && exitCode === undefined ? undefined : { exit_code: exitCode, output };
}

function textOf(content: unknown): string | undefined {
  if (!Array.isArray(content)) return undefined;
  const texts = content.flatMap((c: { type?: string; content?: { type?: string; text?: string } }) => (c.type === 'content' && c.content?.type === 'text' ? [c.content.text ?? ''] : []));
  return texts.length ? texts.join('\n') : undefined;
}
