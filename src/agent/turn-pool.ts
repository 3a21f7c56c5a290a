import type { Worker } from 'node:worker_threads';
import type { AgentEvent } from '../contract/events.ts';
import { AppError } from '../errors.ts';
import { knownFacts, learn, onLearned, type ModelFact } from './model-facts.ts';
import { workerThread } from '../worker-thread.ts';
import { batchedPerPass, fromWire, toColumns, type FromPool, type PooledTurnInput, type ToPool, type WorkerData, type WorkerSettings } from './turn-wire.ts';

/** One turn's events as they arrive from its thread, read by one consumer. */
class Channel {
  readonly events: AgentEvent[] = [];
  ended = false;
  error: Error | undefined;
  private wake: (() => void) | undefined;

  settle(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  next(): Promise<void> {
    return new Promise((resolve) => (this.wake = resolve));
  }
}

/** One worker thread and the turns it runs. Started at its first turn, again after it dies. */
class PoolThread {
  private worker: Worker | undefined;
  private closing = false;
  readonly channels = new Map<number, Channel>();
  private readonly settings: WorkerSettings;
  private readonly entry: URL;
  /**
   * Sends to the running thread, batched per pass of the event loop (`batchedPerPass`). One per
   * thread: a turn started on the thread that replaces a dead one in the same pass must not wait
   * in a batch addressed to the dead one.
   */
  private post: ((message: FromPool) => void) | undefined;

  constructor(settings: WorkerSettings, entry: URL) {
    this.settings = settings;
    this.entry = entry;
  }

  private started(): Worker {
    if (this.closing) throw new AppError('unavailable', 'the server is shutting down; send the turn again once it is back');
    if (this.worker) return this.worker;
    const workerData: WorkerData = { settings: this.settings, facts: knownFacts() };
    const worker = workerThread(this.entry, { workerData });
    // A thread that died meanwhile is gone with its turns, which have been told.
    this.post = batchedPerPass<FromPool>((batch) => this.worker === worker && worker.postMessage(batch));
    worker.on('message', (batch: ToPool[]) => {
      for (const message of batch) {
        if (message.type === 'fact') {
          learn(message.fact);
          continue;
        }
        const channel = this.channels.get(message.id);
        if (!channel) continue;
        if (message.type === 'event') channel.events.push(message.event);
        else if (message.type === 'end') channel.ended = true;
        else channel.error = fromWire(message.error);
        channel.settle();
      }
    });
    // A thread that dies takes its turns with it; they fail rather than wait forever.
    const lost = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      for (const channel of this.channels.values()) {
        channel.error ??= new AppError('unavailable', `the thread running the turn stopped (${why}); send the turn again`);
        channel.settle();
      }
    };
    // The error is one turn's (any project's) and may quote its secrets: the other turns on the
    // thread are told only that it crashed.
    worker.on('error', (error) => lost(`an uncaught ${error.name}`));
    worker.on('exit', (code) => lost(`exit code ${code}`));
    this.worker = worker;
    return worker;
  }

  async *run(id: number, input: PooledTurnInput, signal: AbortSignal): AsyncGenerator<AgentEvent, void, undefined> {
    const worker = this.started();
    const post = this.post!;
    const channel = new Channel();
    this.channels.set(id, channel);
    const abort = () => post({ type: 'abort', id, reason: signal.reason instanceof Error ? signal.reason.message : 'the turn was stopped' });
    signal.addEventListener('abort', abort, { once: true });
    // An idle pool must not keep the process alive; a turn in flight must.
    worker.ref();
    try {
      post({ type: 'run', id, input: { ...input, history: toColumns(input.history) } });
      if (signal.aborted) abort();
      let next = 0;
      for (;;) {
        while (next < channel.events.length) yield channel.events[next++]!;
        if (channel.error) throw channel.error;
        if (channel.ended) return;
        await channel.next();
      }
    } finally {
      signal.removeEventListener('abort', abort);
      if (!channel.ended && !channel.error && this.worker === worker) abort();
      this.channels.delete(id);
      if (this.channels.size === 0) {
        worker.unref();
        if (this.closing) void this.terminate();
      }
    }
  }

  get running(): boolean {
    return this.worker !== undefined;
  }

  /** Starts the thread ahead of its first turn, which would otherwise wait for it to load (~0.3 s). */
  warm(): void {
    if (this.channels.size === 0) this.started().unref();
  }

  /** Tells a running thread what another learnt; one that starts later is told at its start. */
  tell(fact: ModelFact): void {
    if (this.worker) this.post!({ type: 'fact', fact });
  }

  /** No more turns; the thread ends now if idle, else when its last turn does. */
  close(): void {
    this.closing = true;
    if (this.channels.size === 0) void this.terminate();
  }

  private async terminate(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }
}

/**
 * Runs turns on worker threads so one process uses more than one core: the model's HTTP client,
 * the AI SDK's parsing and the tools run on a pool thread, while the server's thread keeps the
 * HTTP, the store and the event stream. A turn goes to the thread with the fewest turns.
 */
export class TurnPool {
  private readonly threads: PoolThread[];
  private nextId = 1;
  private readonly stopTelling: () => void;

  /** `entry` is the thread's script: turn-worker.ts, unless a test stands a failing one in. */
  constructor(size: number, settings: WorkerSettings, entry = new URL('./turn-worker.ts', import.meta.url)) {
    this.threads = Array.from({ length: size }, () => new PoolThread(settings, entry));
    // Whatever this thread learns (its own turns' findings, or a pool thread's, relayed here) every
    // pool thread hears; the one that found it out already knows, and ignores it.
    this.stopTelling = onLearned((fact) => {
      for (const thread of this.threads) thread.tell(fact);
    });
  }

  run(input: PooledTurnInput, signal: AbortSignal): AsyncGenerator<AgentEvent, void, undefined> {
    const thread = this.threads.reduce((least, t) => (t.channels.size < least.channels.size ? t : least));
    return thread.run(this.nextId++, input, signal);
  }

  warm(): void {
    for (const thread of this.threads) thread.warm();
  }

  /** How many of its threads are started: each holds some 40 MB, and none is until the load calls for one. */
  get running(): number {
    return this.threads.filter((thread) => thread.running).length;
  }

  /** Takes no more turns: idle threads end at once, busy ones when their turns have ended. */
  close(): void {
    this.stopTelling();
    for (const thread of this.threads) thread.close();
  }
}
