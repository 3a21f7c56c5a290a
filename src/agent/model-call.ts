import { APICallError, type LanguageModelV4, type LanguageModelV4CallOptions, type LanguageModelV4FinishReason, type LanguageModelV4GenerateResult, type LanguageModelV4StreamPart, type SharedV4ProviderMetadata } from '@ai-sdk/provider';
import { retryWithExponentialBackoff, type RetryFunction } from '@ai-sdk/provider-utils';
import { AppError } from '../errors.ts';
import { isJsonType } from '../media-types.ts';
import { hostOf } from './model-errors.ts';
import { learn, neverStreams, streamOnly } from './model-facts.ts';
import { watched } from './model-timeout.ts';
import { endpointOf } from './model.ts';

export interface ModelCallSettings {
  /** Whether anyone reads the turn as it is written; a non-streaming call costs far less CPU. */
  streaming: boolean;
  timeoutMs: number;
  maxRetries: number;
}

/** Statuses a server that only streams may answer a non-streaming call with. */
const REFUSALS = new Set([400, 405, 415, 422, 501]);

/** A reply that is not the JSON a non-streaming call expects (e.g. an SSE body). */
function isUnreadableReply(error: unknown): boolean {
  for (let e = error; e instanceof Error; e = e.cause) {
    if (e.name === 'AI_JSONParseError' || e.name === 'AI_TypeValidationError' || e.message === 'Invalid JSON response') return true;
  }
  return false;
}

function isHtml(contentType: string | undefined): boolean {
  return contentType !== undefined && /^\s*(text\/html|application\/xhtml\+xml)\s*(;|$)/i.test(contentType);
}

/** The content type of the answer a failed call read, when the error kept its headers. */
function responseType(error: unknown): string | undefined {
  for (let e = error; e instanceof Error; e = e.cause) {
    if (APICallError.isInstance(e)) return e.responseHeaders?.['content-type'];
  }
  return undefined;
}

function isRefusedCall(error: unknown): boolean {
  return error instanceof Error && REFUSALS.has((error as { statusCode?: number }).statusCode ?? 0);
}

/**
 * One model call of a step, as the provider's stream parts whichever way it was made. Streamed
 * when somebody reads the turn as it is written; otherwise one non-streaming call, its content
 * retold as the same parts. What a server turns out to do is learnt once per endpoint
 * (model-facts.ts): one that answers a non-streaming call with SSE only streams from then on, one
 * that answers a streaming call with one JSON body is asked without streaming from then on.
 */
export async function* modelCall(model: LanguageModelV4, options: LanguageModelV4CallOptions, settings: ModelCallSettings): AsyncGenerator<LanguageModelV4StreamPart> {
  const endpoint = endpointOf(model);
  const retried = retrying(settings.maxRetries, options.abortSignal);
  // Each attempt has the whole AGENTD_MODEL_TIMEOUT_MS; the waits between attempts do not count.
  const attempt = <T>(call: (abortSignal: AbortSignal) => PromiseLike<T>) => retried(() => watched(settings.timeoutMs, options.abortSignal, call));
  // A URL parsed only for a failure's message, not on every call.
  const host = () => hostOf(endpoint.split(' ')[0]!);
  const generate = async function* (answered?: () => void) {
    const { value, watch } = await attempt((abortSignal) => model.doGenerate({ ...options, abortSignal }));
    watch.stop();
    answered?.();
    yield* contentParts(value);
    const stopped = filteredAnswer(value.finishReason, host);
    if (stopped) throw stopped;
  };
  if (neverStreams.has(endpoint)) return yield* generate();
  if (!settings.streaming && !streamOnly.has(endpoint)) {
    try {
      return yield* generate();
    } catch (error) {
      // Nothing has reached the turn yet, so the call is made again, streamed. An unreadable reply
      // is a sure sign; a refusal may have other causes, so it is not learnt.
      // An HTML page (a proxy's, a login page) says nothing about how the server streams.
      if (isHtml(responseType(error))) throw error;
      // A JSON body that did not parse is a broken answer, not a sign of a server that only streams.
      if (isUnreadableReply(error) && !isJsonType(responseType(error))) learn({ kind: 'stream-only', endpoint });
      else if (!isRefusedCall(error)) throw error;
    }
  }
  const { value: result, watch } = await attempt((abortSignal) => model.doStream({ ...options, abortSignal }));
  if (isJsonType(result.response?.headers?.['content-type'])) {
    watch.stop();
    // The SDK would read that body as an empty stream: drop it unread and ask again without streaming.
    await result.stream.cancel();
    // Learnt once the server has answered the call made without streaming: a JSON error body, or
    // one that does not parse, says nothing about how it streams.
    return yield* generate(() => learn({ kind: 'never-streams', endpoint }));
  }
  const type = result.response?.headers?.['content-type'];
  if (isHtml(type)) {
    watch.stop();
    // The SDK would read an HTML page as an event stream with no events: an empty answer.
    await result.stream.cancel().catch(() => {});
    throw new AppError('upstream-error', `the model provider at ${host()} answered with an HTML page (${type!.split(';')[0]!.trim()}) instead of an event stream; check the provider's base URL`);
  }
  // Read here rather than through a transform stream of the watchdog's: a stream that goes quiet
  // is cancelled, and said to have timed out.
  const reader = result.stream.getReader();
  watch.onExpire(() => void reader.cancel().catch(() => {}));
  const brokeOff = () => new AppError('upstream-error', `the model provider's answer broke off: its stream ended before the event that completes it (at ${host()})`);
  let done = false;
  let finished = false;
  try {
    watch.restart();
    while (!done) {
      const read = await reader.read().catch((error: unknown) => {
        throw watch.expired ?? error;
      });
      if (watch.expired) throw watch.expired;
      done = read.done;
      if (read.done) break;
      watch.restart();
      const part = read.value;
      // The providers' word for a stream that closed before the event that completes an answer
      // (a dropped connection, a proxy's cut): what came is kept, and the turn fails as broken off.
      if (part.type === 'finish' && part.finishReason.unified === 'interrupted') throw brokeOff();
      yield part;
      if (part.type !== 'finish') continue;
      finished = true;
      const stopped = filteredAnswer(part.finishReason, host);
      if (stopped) throw stopped;
    }
    // Anthropic's provider says nothing of a stream that closed before anything was said (after
    // `message_start`, or with no event at all): without a finish it is no answer, not an empty one.
    if (!finished) throw brokeOff();
  } finally {
    watch.stop();
    // The turn stopped reading (it failed, or was aborted): the rest of the answer is not wanted.
    if (!done) await reader.cancel().catch(() => {});
  }
}

/**
 * An answer the provider's content filter stopped (`finish_reason: "content_filter"` in Chat
 * Completions, `incomplete_details.reason` in the Responses API): what came before it is no whole
 * answer, and asked again it is likely stopped again. A model's refusal (a `refusal` part or field,
 * Anthropic's `refusal` stop) is its answer, and ends the turn as any answer does.
 */
function filteredAnswer(finishReason: LanguageModelV4FinishReason, host: () => string): AppError | undefined {
  if (finishReason.raw !== 'content_filter') return undefined;
  return new AppError('upstream-rejected', `the model provider at ${host()} stopped the answer with its content filter (finish reason "content_filter")`);
}

/**
 * AGENTD_MODEL_MAX_RETRIES, as the AI SDK's own calls retry: retryable API errors only, after the
 * provider's retry-after when it gives a sensible one, else with exponential backoff.
 */
function retrying(maxRetries: number, abortSignal: AbortSignal | undefined): RetryFunction {
  if (maxRetries === 0) return (call) => call();
  return retryWithExponentialBackoff({
    maxRetries,
    abortSignal,
    shouldRetry: async (error) => APICallError.isInstance(error) && error.isRetryable,
    getDelayInMs: ({ error, exponentialBackoffDelay }) => retryAfterMs(error) ?? exponentialBackoffDelay,
    // The last attempt's error is what the caller is told about (toModelError maps it).
    createRetryError: ({ errors }) => errors.at(-1) as Error,
  });
}

/** The provider's retry-after (`retry-after-ms`, else `retry-after` in seconds or as a date), when under a minute. */
function retryAfterMs(error: unknown): number | undefined {
  const headers = APICallError.isInstance(error) ? error.responseHeaders : undefined;
  const ms = Number.parseFloat(headers?.['retry-after-ms'] ?? '');
  const after = headers?.['retry-after'];
  const seconds = Number.parseFloat(after ?? '');
  const wait = Number.isFinite(ms) ? ms : Number.isFinite(seconds) ? seconds * 1000 : after ? Date.parse(after) - Date.now() : Number.NaN;
  return wait >= 0 && wait < 60_000 ? wait : undefined;
}

/** The provider's id of the output item a part belongs to, when it names one (the Responses API's `itemId`). */
function itemIdOf(metadata: SharedV4ProviderMetadata | undefined): string | undefined {
  for (const entry of Object.values(metadata ?? {})) {
    const itemId = entry?.itemId;
    if (typeof itemId === 'string') return itemId;
  }
  return undefined;
}

/**
 * A non-streaming call's content as the parts a stream of it would have had. A stream tells the
 * text parts of one output item (a Responses API message of several parts, a refusal among them)
 * as one text, so they are one text here too: the same answer reads the same in a JSON reply.
 */
function contentParts(result: LanguageModelV4GenerateResult): LanguageModelV4StreamPart[] {
  // An array, not a generator: every JSON turn's answer passes here, and generators delegating to
  // generators cost it 1% of the server thread (a CPU profile of the JSON tool turn).
  const parts: LanguageModelV4StreamPart[] = [];
  let text: { id: string; itemId: string | undefined; providerMetadata: SharedV4ProviderMetadata | undefined } | undefined;
  const endText = () => {
    if (text) parts.push({ type: 'text-end', id: text.id, ...(text.providerMetadata ? { providerMetadata: text.providerMetadata } : {}) });
    text = undefined;
  };
  for (const [at, part] of result.content.entries()) {
    const id = `g${at}`;
    const providerMetadata = 'providerMetadata' in part ? part.providerMetadata : undefined;
    switch (part.type) {
      case 'text': {
        const itemId = itemIdOf(providerMetadata);
        if (!text || itemId === undefined || text.itemId !== itemId) {
          endText();
          text = { id, itemId, providerMetadata };
          parts.push({ type: 'text-start', id });
        }
        text.providerMetadata = providerMetadata;
        parts.push({ type: 'text-delta', id: text.id, delta: part.text });
        break;
      }
      case 'reasoning':
        endText();
        parts.push(
          { type: 'reasoning-start', id },
          { type: 'reasoning-delta', id, delta: part.text },
          { type: 'reasoning-end', id, ...(providerMetadata ? { providerMetadata } : {}) },
        );
        break;
      case 'tool-call':
        endText();
        parts.push(part);
        break;
      default:
        break;
    }
  }
  endText();
  parts.push({ type: 'finish', usage: result.usage, finishReason: result.finishReason, ...(result.providerMetadata ? { providerMetadata: result.providerMetadata } : {}) });
  return parts;
}
