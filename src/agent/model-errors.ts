import { APICallError, JSONParseError, TypeValidationError } from '@ai-sdk/provider';
import { AppError, isAppError } from '../errors.ts';
import { tlsFailure } from '../tls-failure.ts';

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
 * The provider's `retry-after` (seconds or an HTTP date), else its `retry-after-ms` (OpenAI's) in
 * whole seconds, as the caller's `retry-after` header.
 */
function retryAfterOf(headers: Record<string, string> | undefined): string | undefined {
  const given = headers?.['retry-after']?.trim();
  if (given) return given;
  const ms = Number.parseFloat(headers?.['retry-after-ms'] ?? '');
  return Number.isFinite(ms) && ms >= 0 ? String(Math.ceil(ms / 1000)) : undefined;
}

/** What the provider said, or what its answer was when it said nothing a provider's SDK could read (a proxy's HTML page). */
function reasonOf(error: APICallError): string {
  if (error.message.trim()) return error.message;
  const type = error.responseHeaders?.['content-type']?.split(';')[0]?.trim();
  return type ? `no reason given, only a ${type} page` : 'no reason given';
}

/** A long message from a provider's SDK, cut to what a line of an error can hold. */
function clip(text: string, max = 200): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

function pathText(path: ReadonlyArray<PropertyKey>): string {
  return path.map((key, i) => (typeof key === 'number' ? `[${key}]` : `${i > 0 ? '.' : ''}${String(key)}`)).join('');
}

/**
 * What a provider's SDK could not read in an answer, in a line: where its first problem is, the
 * value there and what was wrong, or the JSON parser's complaint. The SDK's own message says
 * "Invalid JSON response" of valid JSON whose shape it does not know, or dumps the whole answer.
 */
function unreadable(error: unknown): string | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (JSONParseError.isInstance(e)) return `not JSON (${e.cause instanceof Error ? e.cause.message : e.message})`;
    if (!TypeValidationError.isInstance(e)) continue;
    const issue = (e.cause as { issues?: Array<{ path: PropertyKey[]; message: string }> } | undefined)?.issues?.[0];
    if (!issue) return clip(e.message);
    let value: unknown = e.value;
    for (const key of issue.path) value = (value as Record<PropertyKey, unknown> | undefined)?.[key];
    const shown = typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? ` (${clip(JSON.stringify(value), 80)})` : '';
    return `${issue.path.length ? `at ${pathText(issue.path)}` : 'the value'}${shown}: ${clip(issue.message)}`;
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
      const retryAfter = retryAfterOf(error.responseHeaders);
      const when = retryAfter && (/^\d+$/.test(retryAfter) ? `${retryAfter} s` : retryAfter);
      return new AppError('upstream-rate-limited', `the model provider at ${where} is rate limiting (HTTP 429)${when ? `; retry after ${when}` : ''}`, {
        cause: error,
        ...(retryAfter ? { headers: { 'retry-after': retryAfter } } : {}),
      });
    }
    if (status === 408 || status === 504) {
      return new AppError('upstream-timeout', `the model provider at ${where} timed out (HTTP ${status})`, { cause: error });
    }
    // An answer came (HTTP 200) that the provider's SDK could not read.
    if (status !== undefined && status < 300) {
      return new AppError('upstream-error', `the model provider at ${where} answered (HTTP ${status}) with a response that could not be read: ${unreadable(error) ?? error.message}`, { cause: error });
    }
    // Any other 4xx refuses the request itself (too long a context, a malformed call): sent again
    // it fails the same way, so retries (an evaluation's, run-many's) skip it.
    if (status !== undefined && status >= 400 && status < 500 && status !== 409) {
      return new AppError('upstream-rejected', `the model provider at ${where} refused the request (HTTP ${status}): ${reasonOf(error)}`, { cause: error });
    }
    if (status !== undefined) {
      return new AppError('upstream-error', `the model provider at ${where} failed (HTTP ${status}): ${reasonOf(error)}`, { cause: error });
    }
    const tls = tlsFailure(error);
    if (tls) return new AppError('upstream-error', `the model provider at ${where} ${tls}`, { cause: error });
    const code = causeCode(error);
    return new AppError('upstream-error', `could not reach the model provider at ${where}${code ? ` (${code})` : ''}: ${error.message}`, { cause: error });
  }
  const failure = streamFailure(error);
  if (failure) return fromStreamFailure(failure, error);
  if (error instanceof Error && (error.name === 'TimeoutError' || causeCode(error) === 'UND_ERR_HEADERS_TIMEOUT')) {
    return new AppError('upstream-timeout', `the model provider did not answer in time: ${error.message}`, { cause: error });
  }
  const tls = tlsFailure(error);
  if (tls) return new AppError('upstream-error', `the model provider ${tls}`, { cause: error });
  const code = causeCode(error);
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'ECONNRESET') {
    return new AppError('upstream-error', `could not reach the model provider (${code})`, { cause: error });
  }
  const what = unreadable(error);
  if (what) return new AppError('upstream-error', `the model provider sent an event that could not be read: ${what}`, { cause: error });
  const message = error instanceof Error ? error.message : String(error);
  return new AppError('upstream-error', `the model provider's response could not be used: ${message}`, { cause: error });
}

/** What a provider said in an error event of a stream that had begun. */
interface StreamFailure {
  message: string;
  statusCode: number | undefined;
  /** The provider's error type and code, e.g. `overloaded_error`, `rate_limit_exceeded`. */
  kind: string;
}

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
}

function httpStatus(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\d{3}$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isInteger(n) && n >= 400 && n <= 599 ? n : undefined;
}

/**
 * A stream's `error` part is not always an Error: the providers pass on the error event itself
 * (OpenAI's `error` and `response.failed`, Anthropic's `overloaded_error`, an OpenAI-compatible
 * server's `{"error": {...}}` chunk), as a plain object or the AI SDK's ProviderStreamError.
 */
function streamFailure(error: unknown): StreamFailure | undefined {
  if (error instanceof Error) return undefined;
  const outer = record(error);
  if (!outer) return undefined;
  const inner = record(record(outer.response)?.error) ?? record(outer.error) ?? outer;
  if (typeof inner.message !== 'string') return undefined;
  const statusCode = [outer.statusCode, inner.statusCode, inner.status, outer.status, inner.code, outer.code].map(httpStatus).find((s) => s !== undefined);
  const kind = [...new Set([inner.type, inner.code, outer.type, outer.code].filter((v): v is string => typeof v === 'string' && v !== '' && !/^\d+$/.test(v)))].join(' ');
  return { message: inner.message, statusCode, kind };
}

function fromStreamFailure({ message, statusCode, kind }: StreamFailure, cause: unknown): AppError {
  const lower = kind.toLowerCase();
  const status =
    statusCode ??
    (/rate_limit|insufficient_quota/.test(lower) ? 429 : /authentication/.test(lower) ? 401 : /permission/.test(lower) ? 403 : /overloaded/.test(lower) ? 529 : undefined);
  const said = `${kind ? ` (${kind})` : ''}: ${message}`;
  if (status === 401 || status === 403) return new AppError('upstream-auth', `the model provider rejected the credentials while answering${said}`, { cause });
  if (status === 429) return new AppError('upstream-rate-limited', `the model provider is rate limiting${said}`, { cause });
  if (status === 408 || status === 504) return new AppError('upstream-timeout', `the model provider timed out while answering${said}`, { cause });
  if (status !== undefined && status >= 400 && status < 500 && status !== 404 && status !== 409) {
    return new AppError('upstream-rejected', `the model provider refused the request while answering${said}`, { cause });
  }
  return new AppError('upstream-error', `the model provider failed while answering${said}`, { cause });
}
