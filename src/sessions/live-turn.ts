import type { UIMessage } from 'ai';
import type { AgentEvent, RanRevision } from '../contract/events.ts';
import type { AppError } from '../errors.ts';
import type { FoldedTurn } from '../stream/fold.ts';

/**
 * A turn that is running (or just ran) in this process. Its events are kept in order so any
 * number of readers can follow it from the start, whenever they arrive; a reader that goes away
 * does not stop the turn.
 */
export class LiveTurn {
  readonly id: string;
  readonly projectId: string;
  readonly sessionId: string;
  readonly traceId: string;
  readonly spanId: string;
  /**
   * The Vercel-format message the turn continues, as its client sent it. A reader that joins the
   * turn later (a resumed chat, an attach) holds no such message, so its replay rebuilds it first.
   */
  readonly continues: UIMessage | undefined;
  /** Interactions answered through the API that this turn takes up: its callers may follow it. */
  readonly takesUp: ReadonlySet<string>;
  /** The stored revision the turn runs, when its request named one by references. */
  readonly revision: RanRevision | undefined;
  /** Runs in another process and is relayed from there: its readers' streams start before its first event. */
  readonly relayed: boolean;
  /** Stops the turn: made before the turn is set up (turn-service.ts), so a stop reaches its setup too. */
  readonly controller: AbortController;
  readonly done: Promise<FoldedTurn>;
  /** Set when the turn failed: the HTTP status, type and headers a reply that has not begun should carry. */
  failure: AppError | undefined;
  private readonly events: AgentEvent[] = [];
  private wake: (() => void) | undefined;
  private wakeSignal: Promise<void>;
  private finished = false;
  private resolveDone!: (turn: FoldedTurn) => void;

  constructor(ids: { id: string; projectId: string; sessionId: string; traceId: string; spanId: string; continues?: UIMessage | undefined; takesUp?: ReadonlySet<string>; revision?: RanRevision | undefined; relayed?: boolean; controller?: AbortController }) {
    this.id = ids.id;
    this.projectId = ids.projectId;
    this.sessionId = ids.sessionId;
    this.traceId = ids.traceId;
    this.spanId = ids.spanId;
    this.continues = ids.continues;
    this.takesUp = ids.takesUp ?? new Set();
    this.revision = ids.revision;
    this.relayed = ids.relayed ?? false;
    this.controller = ids.controller ?? new AbortController();
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    this.wakeSignal = new Promise((resolve) => (this.wake = resolve));
  }

  push(event: AgentEvent): void {
    this.events.push(event);
    this.notify();
  }

  finish(turn: FoldedTurn): void {
    this.finished = true;
    this.resolveDone(turn);
    this.notify();
  }

  get isFinished(): boolean {
    return this.finished;
  }

  private notify(): void {
    const wake = this.wake;
    this.wakeSignal = new Promise((resolve) => (this.wake = resolve));
    wake?.();
  }

  /** Every event from the first, then live ones as they come, until the turn ends. */
  async *follow(): AsyncGenerator<AgentEvent, void, undefined> {
    let next = 0;
    for (;;) {
      while (next < this.events.length) yield this.events[next++]!;
      if (this.finished) return;
      await this.wakeSignal;
    }
  }
}
