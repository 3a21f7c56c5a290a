import type { AgentEvent } from '../contract/events.ts';
import type { RunnableTemplate } from './template.ts';
import type { TurnInput } from './turn.ts';

/**
 * What runs a turn (design.md §3): agentd's own loop (builtin-engine.ts) or a coding-agent harness
 * (harnesses/harness-engine.ts), settled for one template, its model resolved (the choice is
 * sessions/turn-engines.ts's). The turn service prepares it, claims the turn's answers, starts it
 * and releases it, and knows no more of it.
 * A paused turn goes on the same way: its history carries the recorded decisions, which every
 * engine reads from there.
 */
export interface TurnEngine {
  /** What the metrics call it: `agentd`, or the harness's kind. */
  readonly kind: string;
  /** The template with its project connection settled in: what the turn runs. */
  readonly template: RunnableTemplate;
  /** Whether the session folder must be there when the turn starts: something runs in it from the start (a harness). */
  readonly needsFolder: boolean;
  /** Where the template's skills go in the session folder; undefined for agentd's own place. */
  readonly skillsDir: string | undefined;
  /**
   * Takes what the turn needs and may refuse it (an unreachable MCP server, a busy harness pool),
   * before any answer is claimed. Gives back what it took when it fails.
   */
  prepare(setup: EngineSetup): Promise<PreparedTurn>;
}

/** What preparing a turn needs from the session it runs in. */
export interface EngineSetup {
  /** The session folder, which may not be there yet. */
  workdir: string;
  /** Makes the session folder, for what runs in it while the turn is prepared (a stdio MCP server). */
  makeFolder(): Promise<string>;
  /** Where an engine keeps its own state for the session (a harness's sessions and settings), outside the session folder. */
  stateDir: string;
  /** The request's `credentials`, for MCP servers that forward them. */
  credentials: string | undefined;
  /** A private session gets no next turn: nothing is kept waiting for one. */
  privateSession: boolean;
  /** The text the session's last finished turn ended with, read only by an engine that needs it. */
  lastWords: () => Promise<string | undefined>;
  /** The turn's: a stop while the engine prepares ends what it waits on (MCP servers still connecting). */
  signal: AbortSignal;
}

export interface PreparedTurn {
  /** The turn's native events, until it ends or `signal` stops it. */
  start(input: EngineInput, signal: AbortSignal): AsyncGenerator<AgentEvent>;
  /** Gives back what `prepare` took: once the turn has ended, or when it is refused before it starts. */
  release(): Promise<void>;
}

/** What a turn's start carries beyond what its engine was settled and prepared with. */
export type EngineInput = Pick<TurnInput, 'turnId' | 'sessionId' | 'traceId' | 'history' | 'notes' | 'streaming' | 'secretValues'>;

/** Where this process's turns ran: on the server's thread (harness turns among them), or on a turn thread. */
export interface Placement {
  server: number;
  threads: number;
}
