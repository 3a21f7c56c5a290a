import type { LanguageModelV4, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { AppError } from '../errors.ts';

/**
 * AGENTD_MODEL_TIMEOUT_MS bounds waiting for the model, and only that: a call without an answer, a
 * stream with no first part, or one that goes quiet between parts. The SDK's own step timeout
 * would also count the tools a step runs, so a slow tool failed the turn as the provider's fault
 * and lost its result; tools have limits of their own, and the turn as a whole has its own too.
 */
export function withModelTimeout(model: LanguageModelV4, timeoutMs: number): LanguageModelV4 {
  return {
    specificationVersion: 'v4',
    provider: model.provider,
    modelId: model.modelId,
    supportedUrls: model.supportedUrls,
    async doGenerate(options) {
      const watch = new Watchdog(timeoutMs, options.abortSignal);
      try {
        return await model.doGenerate({ ...options, abortSignal: watch.signal });
      } catch (error) {
        throw watch.expired ?? error;
      } finally {
        watch.stop();
      }
    },
    async doStream(options) {
      const watch = new Watchdog(timeoutMs, options.abortSignal);
      let result: Awaited<ReturnType<LanguageModelV4['doStream']>>;
      try {
        result = await model.doStream({ ...options, abortSignal: watch.signal });
      } catch (error) {
        watch.stop();
        throw watch.expired ?? error;
      }
      watch.restart();
      const stream = result.stream.pipeThrough(
        new TransformStream<LanguageModelV4StreamPart, LanguageModelV4StreamPart>({
          start: (controller) => watch.onExpire((error) => controller.error(error)),
          transform: (part, controller) => {
            watch.restart();
            controller.enqueue(part);
          },
          flush: () => watch.stop(),
        }),
      );
      return { ...result, stream };
    },
  };
}

/**
 * One timer per call, re-armed only when it fires (a part just records the time), so a stream of
 * many small parts costs a timestamp each, not a timer each.
 */
class Watchdog {
  readonly signal: AbortSignal;
  expired: AppError | undefined;
  readonly #controller = new AbortController();
  readonly #timeoutMs: number;
  #since = performance.now();
  #timer: NodeJS.Timeout | undefined;
  #expire: ((error: AppError) => void) | undefined;

  constructor(timeoutMs: number, outer: AbortSignal | undefined) {
    this.#timeoutMs = timeoutMs;
    this.signal = outer ? AbortSignal.any([outer, this.#controller.signal]) : this.#controller.signal;
    this.#arm(timeoutMs);
  }

  restart(): void {
    this.#since = performance.now();
  }

  onExpire(expire: (error: AppError) => void): void {
    this.#expire = expire;
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
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
      // The stream was already cancelled by its reader: nobody is left to tell.
    }
  }
}
