import { AppError } from '../errors.ts';

/**
 * AGENTD_MODEL_TIMEOUT_MS bounds waiting for the model, and only that: a call without an answer, a
 * stream with no first part, or one that goes quiet between parts. The SDK's own step timeout
 * would also count the tools a step runs, so a slow tool failed the turn as the provider's fault
 * and lost its result; tools have limits of their own, and the turn as a whole has its own too.
 *
 * `call` is given the signal that ends the call when the time is up; what it answers is returned
 * with the watchdog still running, for a stream to `restart` at every part and `stop` at its end.
 */
export async function watched<T>(timeoutMs: number, outer: AbortSignal | undefined, call: (signal: AbortSignal) => PromiseLike<T>): Promise<{ value: T; watch: Watchdog }> {
  const watch = new Watchdog(timeoutMs, outer);
  try {
    return { value: await call(watch.signal), watch };
  } catch (error) {
    watch.stop();
    throw watch.expired ?? error;
  }
}

/**
 * One timer per call, re-armed only when it fires (a part just records the time), so a stream of
 * many small parts costs a timestamp each, not a timer each.
 */
export class Watchdog {
  readonly signal: AbortSignal;
  expired: AppError | undefined;
  readonly #controller = new AbortController();
  /** The turn's own signal, followed until `stop`. */
  readonly #outer: AbortSignal | undefined;
  readonly #onOuter = () => this.#controller.abort(this.#outer?.reason);
  readonly #timeoutMs: number;
  #since = performance.now();
  #timer: NodeJS.Timeout | undefined;
  #expire: ((error: AppError) => void) | undefined;

  constructor(timeoutMs: number, outer: AbortSignal | undefined) {
    this.#timeoutMs = timeoutMs;
    this.signal = this.#controller.signal;
    // Followed by hand: a composite of `AbortSignal.any` costs 5–6 µs a call more (BENCHMARKS.md).
    if (outer?.aborted) this.#controller.abort(outer.reason);
    else if (outer) {
      this.#outer = outer;
      outer.addEventListener('abort', this.#onOuter, { once: true });
    }
    this.#arm(timeoutMs);
  }

  restart(): void {
    this.#since = performance.now();
  }

  onExpire(expire: (error: AppError) => void): void {
    this.#expire = expire;
  }

  /** The call has ended: no timer, and the turn's signal no longer holds on to it. */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#outer?.removeEventListener('abort', this.#onOuter);
  }

  #arm(ms: number): void {
    this.#timer = setTimeout(() => this.#check(), ms);
    this.#timer.unref();
  }

  #check(): void {
    const left = this.#timeoutMs - (performance.now() - this.#since);
    if (left > 1) return this.#arm(left);
    this.expired = new AppError('upstream-timeout', `the model provider did not answer within ${this.#timeoutMs} ms (AGENTD_MODEL_TIMEOUT_MS)`);
    this.#controller.abort(this.expired);
    try {
      this.#expire?.(this.expired);
    } catch {
      // Whoever was to be told has gone (the stream ended meanwhile): nobody is left to tell.
    }
  }
}
