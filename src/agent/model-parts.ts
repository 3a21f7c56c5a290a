import type { LanguageModelV4 } from '@ai-sdk/provider';
import { generateText, simulateStreamingMiddleware, streamText, wrapLanguageModel, type LanguageModel, type TextStreamPart, type ToolSet } from 'ai';
import { generatedParts } from './generated-parts.ts';
import { withModelTimeout } from './model-timeout.ts';
import { learn, neverStreams, streamOnly } from './model-facts.ts';
import { endpointOf } from './model.ts';

/** What a turn asks of the model, whichever way it is called. */
type ModelCall = Parameters<typeof generateText>[0] & Parameters<typeof streamText>[0] & { model: LanguageModel };

/** Statuses a server that only streams may answer a non-streaming call with. */
const REFUSALS = new Set([400, 405, 415, 422, 501]);

/** A reply that is not the JSON a non-streaming call expects (e.g. an SSE body). */
function isUnreadableReply(error: unknown): boolean {
  for (let e = error; e instanceof Error; e = e.cause) {
    if (e.name === 'AI_JSONParseError' || e.name === 'AI_TypeValidationError' || e.message === 'Invalid JSON response') return true;
  }
  return false;
}

function isRefusedCall(error: unknown): boolean {
  return error instanceof Error && REFUSALS.has((error as { statusCode?: number }).statusCode ?? 0);
}

/**
 * The model's side of a turn as the stream's parts. Streamed when somebody reads the turn as it
 * is written; otherwise one non-streaming call per step (about a third of the CPU), retold as the
 * same parts by generatedParts.
 */
export async function* modelParts(given: ModelCall, options: { streaming: boolean; timeoutMs: number }): AsyncGenerator<TextStreamPart<ToolSet>> {
  const endpoint = endpointOf(given.model);
  const call = { ...given, model: isV4(given.model) ? withModelTimeout(given.model, options.timeoutMs) : given.model };
  if (!options.streaming && !streamOnly.has(endpoint)) {
    let started = false;
    try {
      const result = await generateText({
        ...call,
        onStepFinish: () => void (started = true),
        onToolExecutionStart: () => void (started = true),
      });
      yield* generatedParts(result);
      return;
    } catch (error) {
      // A server that can only stream answers a non-streaming call with SSE, or refuses it: nothing
      // has run yet, so the turn starts over streaming. An unreadable reply is a sure sign, and
      // that endpoint is streamed from now on; a refusal may have other causes, so it is not.
      if (started) throw error;
      if (isUnreadableReply(error)) learn({ kind: 'stream-only', endpoint });
      else if (!isRefusedCall(error)) throw error;
    }
  }
  yield* streamText({
    ...call,
    model: isV4(call.model) ? streamedOrSimulated(call.model, endpoint) : call.model,
    // The default prints the raw error (upstream bodies, possibly echoed secrets) to stderr; the
    // error reaches the caller through the stream's error part instead.
    onError: () => {},
  }).stream;
}

function isV4(model: LanguageModel): model is LanguageModelV4 {
  return typeof model !== 'string' && model.specificationVersion === 'v4';
}

function isJson(headers: Record<string, string | undefined> | undefined): boolean {
  return /^application\/(?:[\w.+-]+\+)?json\b/i.test(headers?.['content-type'] ?? '');
}

/**
 * A model whose streaming calls fall back to one non-streaming call retold as a stream, for
 * servers that ignore `stream: true` and answer with one JSON body (simple OpenAI-compatible
 * servers and test doubles do). That answer is dropped unread, since the SDK would read it as an
 * empty stream, and the endpoint is asked without streaming from then on.
 */
function streamedOrSimulated(model: LanguageModelV4, endpoint: string): LanguageModelV4 {
  const simulated = () => wrapLanguageModel({ model, middleware: simulateStreamingMiddleware() });
  if (neverStreams.has(endpoint)) return simulated();
  return {
    specificationVersion: 'v4',
    provider: model.provider,
    modelId: model.modelId,
    supportedUrls: model.supportedUrls,
    doGenerate: (options) => model.doGenerate(options),
    async doStream(options) {
      if (neverStreams.has(endpoint)) return simulated().doStream(options);
      const result = await model.doStream(options);
      if (!isJson(result.response?.headers)) return result;
      await result.stream.cancel();
      learn({ kind: 'never-streams', endpoint });
      return simulated().doStream(options);
    },
  };
}
