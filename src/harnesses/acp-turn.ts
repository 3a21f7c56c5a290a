import { mkdir } from 'node:fs/promises';
import { pendingInteraction, type AgentEvent, type Usage } from '../contract/events.ts';
import { AppError } from '../errors.ts';
import { EventQueue } from './event-queue.ts';
import { UpdateTeller, type Gated, type TellerInput } from './update-teller.ts';
import { HarnessConnection, type ConnectionListener, type HarnessProcess } from './harness-connection.ts';
import { park, takeParked } from './parked.ts';
import { readOwnFile, writeOwnFile } from './own-files.ts';

/**
 * What becomes of a gated call: run it, refuse it, or pause the turn for a person. A decision
 * recorded for the call a paused turn asked about names that call (`answers`): the harness asks
 * again under a new id after the pause, and the output tells it as the call that was paused.
 */
export type GateAnswer = { approved: boolean; answers?: string } | 'pause';

/** A turn on a harness: how to start it, where, what to prompt, and how its calls are decided. */
export interface AcpTurnInput extends TellerInput {
  /** How to start a process for the turn, when no parked one serves. */
  start: () => Promise<HarnessProcess>;
  /** The session folder: the harness's working directory. */
  cwd: string;
  /** Where the harness's own session id is kept between turns (in its state folder). */
  stateDir: string;
  /** The text the session's last turn ended with, which a session loaded from the state folder must have. */
  lastWords?: string;
  /** ACP `_meta` for `session/new` and `session/load` (Harness.sessionMeta). */
  sessionMeta?: Record<string, unknown> | undefined;
  /**
   * What the harness's own system prompt is made of (`harness.extras`): a saved session started
   * under another is not loaded, since Codex keeps the instructions a session started with.
   */
  system: string;
  /** The prompt, for a harness session that goes on (false) or one that starts anew (true). */
  prompt: (fresh: boolean) => string;
  gate: (call: Gated) => GateAnswer;
  /** How many decisions recorded for this turn's calls the harness has not asked about yet. */
  decisionsLeft: () => number;
  newInteractionId: () => string;
  signal: AbortSignal;
  /** How long the process may wait for the session's next turn, and how many may wait (parked.ts). */
  parking: { ttlMs: number; max: number };
  /**
   * Everything the harness read when it started (its command, environment, settings, instructions,
   * MCP servers): a parked process is reused only by a turn that would start it the same way.
   */
  fingerprint: string;
  /** How long a new process has to answer ACP `initialize` (INITIALIZE_TIMEOUT_MS unless a test says). */
  initializeTimeoutMs?: number;
}

/** What the turn ended as: the harness's stop reason, or paused on the interactions it asked for. */
export interface AcpTurnEnd {
  paused: boolean;
  /** ACP's stop reason (`end_turn`, `max_tokens`, `cancelled`…). */
  stopReason: string;
  usage: Usage | undefined;
}

const SESSION_FILE = 'acp-session.json';

/** How long a paused turn waits for the calls approved before its pause to end (UpdateTeller.stopWhenSettled). */
const SETTLE_LIMIT_MS = 60_000;
/**
 * How long a paused turn waits for the harness to ask about the calls it holds decisions for. A
 * harness that asks about a step's calls together (Codex) may ask about a decided one just after
 * the one that pauses; one whose model asked for other calls this time never will.
 */
const DECIDED_ASK_LIMIT_MS = 2_000;

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
  let connection = await takeParked(input.stateDir, input.fingerprint);
  let paused = false;
  let sessionId: string | undefined;
  const abort = () => void connection?.end();
  input.signal.addEventListener('abort', abort, { once: true });

  /** Once paused: settles when the calls approved for the turn have ended (UpdateTeller.stopWhenSettled). */
  let settled: Promise<void> | undefined;
  let allDecidedAsked: (() => void) | undefined;
  /** Settles once the harness has asked about every call decided for this turn, or has had its time to. */
  const decisionsAsked = () =>
    new Promise<void>((resolve) => {
      if (input.decisionsLeft() === 0) return resolve();
      const timer = setTimeout(resolve, DECIDED_ASK_LIMIT_MS);
      allDecidedAsked = () => {
        if (input.decisionsLeft() === 0) (clearTimeout(timer), resolve());
      };
    });

  /** The answer to a question whose call is not run: at once, or once the pause settles (HarnessDialect.asksTogether). */
  const notRun = async () => {
    if (input.dialect.asksTogether) await settled;
    return { outcome: { outcome: 'cancelled' as const } };
  };

  const listener: ConnectionListener = {
    permission: async (params) => {
      const call = teller.describe(params.toolCall);
      const answer = input.gate(call);
      // Once paused, the turn is over: whatever the harness asks on its way out is not run, but for
      // the calls decided for this turn, whose decisions would otherwise be spent unused.
      if (settled && (answer === 'pause' || answer.answers === undefined)) return notRun();
      teller.tell(call.toolCallId, answer === 'pause' ? undefined : answer.answers);
      if (answer === 'pause') {
        paused = true;
        events.push({ type: 'interaction_request', data: pendingInteraction(input.newInteractionId(), 'user_approval', call) });
        settled = teller.stopWhenSettled(SETTLE_LIMIT_MS, decisionsAsked());
        void settled.then(() => {
          if (sessionId) void connection?.agent.notify('session/cancel', { sessionId }).catch(() => undefined);
        });
        return notRun();
      }
      const kinds = answer.approved ? ['allow_once', 'allow_always'] : ['reject_once', 'reject_always'];
      const option = params.options.find((o) => o.kind === kinds[0]) ?? params.options.find((o) => o.kind === kinds[1]);
      if (answer.approved && option) teller.approved(call.toolCallId);
      else if (option) teller.denied(call.toolCallId);
      // After the call is marked approved: a pause that settles now waits for it to end.
      if (answer.answers !== undefined) allDecidedAsked?.();
      if (!option) return { outcome: { outcome: 'cancelled' } };
      return { outcome: { outcome: 'selected', optionId: option.optionId } };
    },
    update: (update) => teller.update(update),
  };

  // A process that dies mid-prompt ends the turn even if its connection never says so.
  let died!: () => void;
  const death = new Promise<{ ok: false; error: undefined }>((resolve) => (died = () => resolve({ ok: false, error: undefined })));
  const work = (async () => {
    connection ??= await HarnessConnection.start(await input.start(), input.cwd, input.signal, input.initializeTimeoutMs);
    if (input.signal.aborted) throw input.signal.reason;
    connection.modelCalls?.reset();
    connection.listener = listener;
    void connection.exited.then(() => {
      events.close();
      died();
    });
    const opened = await connection.openSession(await harnessSession(input.stateDir, input.system), input.cwd, input.lastWords, input.sessionMeta);
    sessionId = opened.sessionId;
    if (opened.fresh) await saveSession(input.stateDir, sessionId, input.system);
    const response = await connection.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: input.prompt(opened.fresh) }] });
    const endedOnDenial = teller.end();
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
    // A harness tells a failed model call in its own words, if at all (a "Retrying…" notice, an
    // empty answer): the status its relay saw is what the turn ended on.
    const modelFailure = paused ? undefined : connection?.modelCalls?.failure;
    if (modelFailure) throw modelFailure;
    if (!result.ok && !paused) throw harnessFailure(result.error, connection);
    reusable = result.ok && !paused;
    return { paused, stopReason: result.ok ? result.stopReason : 'cancelled', usage: result.ok ? result.usage : undefined };
  } finally {
    input.signal.removeEventListener('abort', abort);
    if (connection) {
      connection.listener = undefined;
      // A process with nowhere to park ends here, within its turn: until it has, it holds its seat.
      if (reusable && input.parking.ttlMs > 0 && input.parking.max > 0) park(input.stateDir, input.fingerprint, connection, input.parking);
      else await connection.retire();
    }
  }
}

function harnessFailure(error: unknown, connection: HarnessConnection | undefined): AppError {
  if (error instanceof AppError) return error;
  const detail = error instanceof Error ? error.message : 'the harness process ended before the turn did';
  const tail = connection?.stderrTail;
  return new AppError('upstream-error', `the harness failed: ${detail}${tail ? ` (${tail})` : ''}`, { cause: error });
}

/** The harness's own session id an earlier turn of this session left in its state folder, if started under this system prompt. */
async function harnessSession(stateDir: string, system: string): Promise<string | undefined> {
  try {
    const saved = JSON.parse((await readOwnFile(stateDir, SESSION_FILE)) ?? '{}') as { sessionId?: string; system?: string };
    return (saved.system ?? '{}') === system ? saved.sessionId : undefined;
  } catch {
    return undefined;
  }
}

async function saveSession(stateDir: string, sessionId: string, system: string): Promise<void> {
  await mkdir(stateDir, { recursive: true });
  await writeOwnFile(stateDir, SESSION_FILE, JSON.stringify({ sessionId, system }));
}

