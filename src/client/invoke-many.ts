import type { AgentdClient, InvokeBody, InvokeReply, TurnOptions } from './client.ts';
import { AgentdError } from './errors.ts';

/**
 * Running many inputs (spec §4.7): one invoke per input, `concurrency` at a time, each with its own
 * outcome — one failure never touches the others — returned in input order whatever order they
 * finished in. Rate limits and server failures are retried, waiting at least what `retry-after`
 * asks; an input whose session runs another turn waits for it, however long.
 */

export interface InvokeManyProgress {
  total: number;
  done: number;
  failed: number;
  inFlight: number;
}

export type Outcome =
  | { index: number; ok: true; response: InvokeReply; attempts: number; durationMs: number }
  | { index: number; ok: false; error: AgentdError; attempts: number; durationMs: number };

export interface InvokeManyOptions {
  /** Inputs in flight at once (default 8). `session: "shared"` runs one at a time. */
  concurrency?: number;
  /**
   * `fresh` (default): each input is its own conversation with its own session id;
   * `shared`: one conversation, inputs in order, each turn carrying the history so far;
   * `none`: the server mints an id per input.
   */
  session?: 'fresh' | 'shared' | 'none';
  /** `shared`: the session's id; `fresh`: the prefix of each input's id. Random when absent. */
  sessionId?: string;
  /** Further tries of an input that failed with a retryable error (default 2); a busy session is waited for without counting. */
  retries?: number;
  /** Milliseconds before a retry, or between looks at a busy session (default 1000); a longer `retry-after` wins. */
  retryDelay?: number;
  onProgress?: (progress: InvokeManyProgress) => void;
  /** Each outcome as soon as it is known, e.g. to write it out. */
  onOutcome?: (outcome: Outcome) => void;
  /** Stops starting inputs and aborts those in flight; they end as `cancelled` failures. */
  signal?: AbortSignal;
  turn?: Omit<TurnOptions, 'signal'>;
}

const cancelled = () => new AgentdError({ code: 0, type: 'cancelled', message: 'invokeMany was cancelled before this input finished' });

function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

const randomId = () => Math.random().toString(36).slice(2, 10);

export async function invokeMany(client: Pick<AgentdClient, 'invoke'>, inputs: readonly InvokeBody[], options: InvokeManyOptions = {}): Promise<Outcome[]> {
  const mode = options.session ?? 'fresh';
  const concurrency = mode === 'shared' ? 1 : Math.max(1, Math.floor(options.concurrency ?? 8));
  const retries = Math.max(0, options.retries ?? 2);
  const retryDelay = Math.max(0, options.retryDelay ?? 1000);
  const sessionId = options.sessionId ?? `many-${randomId()}`;
  const signal = options.signal;
  const outcomes: Outcome[] = new Array(inputs.length);
  const progress: InvokeManyProgress = { total: inputs.length, done: 0, failed: 0, inFlight: 0 };
  /** `shared`: the conversation so far, grown by each turn that succeeds. */
  let history: unknown[] = [];
  /**
   * The server refused the key itself (401, or 403 for this project): every input would be refused
   * alike, so none is sent after it, and each ends with that answer.
   */
  let refused: AgentdError | undefined;

  const requestFor = (input: InvokeBody, index: number): InvokeBody => {
    const messages = input.data?.inputs?.messages ?? [];
    switch (mode) {
      case 'fresh':
        return { ...input, session_id: input.session_id ?? `${sessionId}-${index}` };
      case 'none': {
        const { session_id: _dropped, ...rest } = input;
        return rest;
      }
      case 'shared':
        return { ...input, session_id: sessionId, data: { ...input.data, inputs: { ...input.data?.inputs, messages: [...history, ...messages] } } };
    }
  };

  const settle = (outcome: Outcome) => {
    outcomes[outcome.index] = outcome;
    progress.inFlight--;
    progress.done++;
    if (!outcome.ok) progress.failed++;
    options.onOutcome?.(outcome);
    options.onProgress?.({ ...progress });
  };

  async function run(index: number): Promise<void> {
    const input = inputs[index]!;
    const started = Date.now();
    progress.inFlight++;
    options.onProgress?.({ ...progress });
    let attempts = 0;
    for (;;) {
      if (signal?.aborted) return settle({ index, ok: false, error: cancelled(), attempts, durationMs: Date.now() - started });
      if (refused) return settle({ index, ok: false, error: refused, attempts, durationMs: Date.now() - started });
      attempts++;
      try {
        const request = requestFor(input, index);
        const response = await client.invoke(request, { ...options.turn, ...(mode === 'shared' ? { trim: false } : {}), ...(signal ? { signal } : {}) });
        if (mode === 'shared') history = [...(request.data?.inputs?.messages ?? []), ...(response.data?.outputs.messages ?? [])];
        return settle({ index, ok: true, response, attempts, durationMs: Date.now() - started });
      } catch (caught) {
        const error = signal?.aborted ? cancelled() : caught instanceof AgentdError ? caught : new AgentdError({ code: 0, type: 'network', message: String(caught) }, { cause: caught });
        // A busy session ran no turn of this input: waiting for it (its turn may go on for minutes,
        // one a Ctrl-C left running on the server, say) is no attempt and uses up no retry.
        if (error.sessionBusy) attempts--;
        if (error.status.code === 401 || error.status.code === 403) refused ??= error;
        if (!error.retryable || attempts > retries || signal?.aborted) return settle({ index, ok: false, error, attempts, durationMs: Date.now() - started });
        await wait(Math.max(retryDelay, error.retryAfterMs ?? 0), signal);
      }
    }
  }

  let next = 0;
  const workers = Array.from({ length: Math.min(concurrency, inputs.length) }, async () => {
    while (next < inputs.length) await run(next++);
  });
  await Promise.all(workers);
  return outcomes;
}
