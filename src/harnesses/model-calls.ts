import { STATUS_CODES } from 'node:http';
import { APICallError } from '@ai-sdk/provider';
import { refusalIn } from '../agent/address-policy.ts';
import { hostOf, toModelError } from '../agent/model-errors.ts';
import { AppError } from '../errors.ts';

/**
 * What a harness's calls to its model, made through its relay, last came to. A harness tells a
 * failed call only in its own words (a "Retrying…" notice, an empty answer, an error text), so the
 * relay, which sees each answer's status, keeps the failure: the turn then ends with the same
 * status the built-in loop gives the same failure (424, 429 with its retry-after, 502, 504), not
 * with a 200 or a generic 502. A call that succeeds clears it.
 */
export class ModelCalls {
  readonly url: string;
  /** How long the model may send nothing (before its answer starts, or between its chunks). */
  readonly timeoutMs: number;
  #failure: AppError | undefined;

  constructor(url: string, timeoutMs: number) {
    this.url = url;
    this.timeoutMs = timeoutMs;
  }

  /** The last call's failure, when no call succeeded after it. */
  get failure(): AppError | undefined {
    return this.#failure;
  }

  /** A turn starts on the process: what an earlier turn's calls came to is not its. */
  reset(): void {
    this.#failure = undefined;
  }

  answered(status: number, headers: Record<string, string | string[] | undefined>): void {
    if (status < 400) {
      this.#failure = undefined;
      return;
    }
    const responseHeaders: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers)) if (typeof value === 'string') responseHeaders[name] = value;
    // The body is left out: a provider's error text may quote what it was sent.
    this.#failure = toModelError(new APICallError({ message: STATUS_CODES[status] ?? `HTTP ${status}`, url: this.url, requestBodyValues: undefined, statusCode: status, responseHeaders }));
  }

  timedOut(): void {
    this.#failure = new AppError('upstream-timeout', `the model provider at ${hostOf(this.url)} sent nothing for ${this.timeoutMs} ms (AGENTD_MODEL_TIMEOUT_MS)`);
  }

  unreachable(error: Error): void {
    // Only a connection's base URL is resolved by a lookup that refuses (HarnessTurnInput.modelLookup).
    const refused = refusalIn(error);
    if (refused) {
      this.#failure = new AppError('invalid-request', `the connection's base_url: ${refused.message}`);
      return;
    }
    const code = (error as { code?: unknown }).code;
    this.#failure = new AppError('upstream-error', `could not reach the model provider at ${hostOf(this.url)}${typeof code === 'string' ? ` (${code})` : ''}`);
  }
}
