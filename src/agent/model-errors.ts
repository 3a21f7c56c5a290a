import { APICallError, RetryError } from 'ai';
import { AppError, isAppError } from '../errors.ts';

export function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'the model provider';
  }
}

function causeCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let i = 0; i < 5 && current && typeof current === 'object'; i++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Maps what a provider call can throw to a status the caller can act on: bad upstream credentials
 * are the operator's to fix (424), rate limits pass through with their retry-after (429), a dead or
 * broken upstream is a gateway failure (502/504). Never a 500 for someone else's outage.
 */
export function toModelError(error: unknown): AppError {
  if (isAppError(error)) return error;
  if (RetryError.isInstance(error)) return toModelError(error.lastError);
  if (APICallError.isInstance(error)) {
    const status = error.statusCode;
    const where = hostOf(error.url);
    if (status === 401 || status === 403) {
      return new AppError('upstream-auth', `the model provider at ${where} rejected the credentials (HTTP ${status}); check the provider API key`, { cause: error });
    }
    if (status === 404) {
      return new AppError('upstream-auth', `the model provider at ${where} answered 404: ${error.message}; check llm.model and the provider's base URL`, { status: 424, cause: error });
    }
    if (status === 429) {
      const retryAfter = error.responseHeaders?.['retry-after'];
      return new AppError('upstream-rate-limited', `the model provider at ${where} is rate limiting (HTTP 429)${retryAfter ? `; retry after ${retryAfter} s` : ''}`, {
        cause: error,
        ...(retryAfter ? { headers: { 'retry-after': retryAfter } } : {}),
      });
    }
    if (status === 408 || status === 504) {
      return new AppError('upstream-timeout', `the model provider at ${where} timed out (HTTP ${status})`, { cause: error });
    }
    // Any other 4xx refuses the request itself (too long a context, a malformed call): sent again
    // it fails the same way, so retries (an evaluation's, run-many's) skip it.
    if (status !== undefined && status >= 400 && status < 500 && status !== 409) {
      return new AppError('upstream-rejected', `the model provider at ${where} refused the request (HTTP ${status}): ${error.message}`, { cause: error });
    }
    if (status !== undefined) {
      return new AppError('upstream-error', `the model provider at ${where} failed (HTTP ${status}): ${error.message}`, { cause: error });
    }
    const code = causeCode(error);
    return new AppError('upstream-error', `could not reach the model provider at ${where}${code ? ` (${code})` : ''}: ${error.message}`, { cause: error });
  }
  if (error instanceof Error && (error.name === 'TimeoutError' || causeCode(error) === 'UND_ERR_HEADERS_TIMEOUT')) {
    return new AppError('upstream-timeout', `the model provider did not answer in time: ${error.message}`, { cause: error });
  }
  const code = causeCode(error);
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'ECONNRESET') {
    return new AppError('upstream-error', `could not reach the model provider (${code})`, { cause: error });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new AppError('upstream-error', `the model provider's response could not be used: ${message}`, { cause: error });
}
