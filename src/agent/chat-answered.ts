import { APICallError, type LanguageModelV4StreamPart, type LanguageModelV4StreamResult } from '@ai-sdk/provider';

/**
 * A server that answers every path as Chat Completions (small OpenAI-compatible servers and test
 * doubles route nothing) answers a Responses API call with a Chat Completions body or stream. The
 * AI SDK then fails to read it: a JSON reply as "Invalid JSON response", a stream with an error
 * part naming the mismatch. Both carry what the server sent, and that is what is checked here.
 */
export function answeredAsChat(error: unknown): boolean {
  if (!APICallError.isInstance(error) || error.responseBody === undefined) return false;
  try {
    const body: unknown = JSON.parse(error.responseBody);
    return typeof body === 'object' && body !== null && Array.isArray((body as { choices?: unknown }).choices) && typeof (body as { type?: unknown }).type !== 'string';
  } catch {
    return false;
  }
}

/**
 * A stream's result whose opening was read: up to the first part that is not the stream's start.
 * Thrown when that part is an error saying the server answered as Chat Completions, so the caller
 * can ask the server that way instead; otherwise the same result, its stream replaying what was read.
 */
export async function unlessAnsweredAsChat(result: LanguageModelV4StreamResult): Promise<LanguageModelV4StreamResult> {
  const reader = result.stream.getReader();
  const opening: LanguageModelV4StreamPart[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    opening.push(value);
    if (value.type === 'stream-start') continue;
    if (value.type === 'error' && answeredAsChat(value.error)) {
      await reader.cancel();
      throw value.error;
    }
    break;
  }
  const stream = new ReadableStream<LanguageModelV4StreamPart>({
    start(controller) {
      for (const part of opening) controller.enqueue(part);
    },
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return { ...result, stream };
}
