import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema, type UIMessage, type UIMessageChunk } from 'ai';
import type { AgentEvent } from '../../src/contract/events.ts';
import { VERCEL_DONE, VercelProjector, vercelSseFrame } from '../../src/stream/vercel.ts';

/** Drives our projection through the AI SDK's own client code, the way `useChat` consumes it. */

export function project(events: readonly AgentEvent[], messageId = 'asst_1'): UIMessageChunk[] {
  const projector = new VercelProjector({ messageId, startMetadata: { session_id: 'sess_1', trace_id: 'trace_1' } });
  return events.flatMap((e) => projector.push(e));
}

export async function checkChunks(chunks: readonly UIMessageChunk[]): Promise<void> {
  const schema = uiMessageChunkSchema();
  for (const chunk of chunks) {
    const result = await schema.validate!(chunk);
    if (!result.success) throw new Error(`chunk ${JSON.stringify(chunk)} rejected: ${result.error.message}`);
  }
}

/** The final message `readUIMessageStream` builds; its errors (and `error` chunks) are reported. */
export async function readFinal(
  chunks: readonly UIMessageChunk[],
  message?: UIMessage,
): Promise<{ message: UIMessage | undefined; errors: string[] }> {
  const errors: string[] = [];
  let last: UIMessage | undefined;
  const stream = new ReadableStream<UIMessageChunk>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  const input = message === undefined ? undefined : structuredClone(message);
  for await (const snapshot of readUIMessageStream({ stream, message: input, onError: (e) => errors.push(String((e as Error).message ?? e)) })) {
    last = snapshot;
  }
  return { message: last, errors };
}

/** Serialises as our HTTP layer will and parses as `DefaultChatTransport` does. */
export async function overTheWire(chunks: readonly UIMessageChunk[]): Promise<UIMessageChunk[]> {
  const body = chunks.map(vercelSseFrame).join('') + VERCEL_DONE;
  const bytes = new ReadableStream<Uint8Array>({
    start(controller) {
      // Split mid-frame to prove framing does not depend on write boundaries.
      const all = new TextEncoder().encode(body);
      for (let i = 0; i < all.length; i += 7) controller.enqueue(all.slice(i, i + 7));
      controller.close();
    },
  });
  return parsedChunks(bytes);
}

/** The chunks of an HTTP response carrying the UI message stream, parsed as the SDK's transport does. */
export async function responseChunks(res: Response): Promise<UIMessageChunk[]> {
  return parsedChunks(res.body!);
}

async function parsedChunks(stream: ReadableStream<Uint8Array>): Promise<UIMessageChunk[]> {
  const out: UIMessageChunk[] = [];
  const reader = parseJsonEventStream({ stream, schema: uiMessageChunkSchema }).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!value.success) throw value.error;
    out.push(value.value);
  }
  return out;
}
