import { parseJsonEventStream, uiMessageChunkSchema, type UIMessage, type UIMessageChunk } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { readFinal } from '../support/sdk-client.ts';
import { startHarness, template, type Harness } from '../support/harness.ts';

/**
 * A native invoke body with the Vercel projection, read by the SDK's own parser and message
 * builder: if `readUIMessageStream` can build the message, `useChat` can render it.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

interface Read {
  res: Response;
  raw: string;
  chunks: UIMessageChunk[];
  message: UIMessage | undefined;
  errors: string[];
}

async function invokeVercelStream(body: unknown): Promise<Read> {
  const res = await h.invoke(body, { headers: { accept: 'text/event-stream', 'x-ag-messages-format': 'vercel' } });
  expect(res.status).toBe(200);
  const raw = await res.text();

  // Parse the bytes the way DefaultChatTransport does, schema validation included.
  const bytes = new Response(raw).body!;
  const chunks: UIMessageChunk[] = [];
  const reader = parseJsonEventStream({ stream: bytes, schema: uiMessageChunkSchema }).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!value.success) throw new Error(`chunk rejected by the SDK schema: ${value.error.message} (raw ${JSON.stringify(value.rawValue)})`);
    chunks.push(value.value);
  }

  const { message, errors } = await readFinal(chunks);
  return { res, raw, chunks, message, errors };
}

/** The native envelope; with `x-ag-messages-format: vercel` its messages are UIMessages. */
function uiTurn(text: string, agent: unknown) {
  return { data: { inputs: { messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text }] }] }, parameters: { agent } } };
}

const chunkOf = <T extends UIMessageChunk['type']>(chunks: UIMessageChunk[], type: T) =>
  chunks.find((c) => c.type === type) as Extract<UIMessageChunk, { type: T }> | undefined;

describe('Vercel UI message stream read by readUIMessageStream', () => {
  it('text turn: one text part with the model text, headers, [DONE], start/finish metadata', async () => {
    h.model.script({ text: 'Hello from the fake model.', usage: { input: 11, output: 5 } });
    const { res, raw, chunks, message, errors } = await invokeVercelStream({
      session_id: 'vercel-read-text',
      ...uiTurn('hi', template()),
    });

    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(res.headers.get('x-ag-messages-format')).toBe('vercel');
    expect(res.headers.get('x-ag-messages-version')).toBe('v1');
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(raw.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(raw.match(/data: \[DONE\]/g)).toHaveLength(1);

    expect(errors).toEqual([]);
    expect(chunks[0]?.type).toBe('start');
    expect(chunks.at(-1)?.type).toBe('finish');

    const start = chunkOf(chunks, 'start')!;
    const traceId = res.headers.get('x-ag-trace-id');
    expect(start.messageMetadata).toEqual({ session_id: 'vercel-read-text', trace_id: traceId, sessionId: 'vercel-read-text', traceId });
    expect(res.headers.get('x-ag-trace-id')).toMatch(/^[0-9a-f]{32}$/);

    const finish = chunkOf(chunks, 'finish')!;
    expect(finish.finishReason).toBe('stop');
    expect(finish.messageMetadata).toMatchObject({ stop_reason: 'end_turn', usage: { input: 11, output: 5, total: 16 } });

    expect(message?.role).toBe('assistant');
    const textParts = message!.parts.filter((p) => p.type === 'text');
    expect(textParts).toEqual([{ type: 'text', text: 'Hello from the fake model.', state: 'done' }]);
    // Start and finish metadata are merged into the message, as the client shows them.
    expect(message!.metadata).toMatchObject({ session_id: 'vercel-read-text', stop_reason: 'end_turn' });
  });

  it('tool turn: a tool-write part with its output, then the answer text', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'notes.txt', content: 'hello file' } }] }, { text: 'I wrote notes.txt.' }]);
    const { chunks, message, errors } = await invokeVercelStream({
      session_id: 'vercel-read-tool',
      ...uiTurn('write a file', template({ tools: [{ type: 'builtin', name: 'write' }] })),
    });
    expect(errors).toEqual([]);
    expect(chunkOf(chunks, 'finish')?.finishReason).toBe('stop');

    const parts = message!.parts;
    const toolIndex = parts.findIndex((p) => p.type === 'tool-write');
    const textIndex = parts.findIndex((p) => p.type === 'text');
    expect(toolIndex).toBeGreaterThanOrEqual(0);
    expect(textIndex).toBeGreaterThan(toolIndex);
    const tool = parts[toolIndex] as Extract<UIMessage['parts'][number], { type: `tool-${string}` }>;
    expect(tool).toMatchObject({ state: 'output-available', input: { path: 'notes.txt', content: 'hello file' } });
    expect(tool.state === 'output-available' && tool.output).toBeTruthy();
    expect(parts[textIndex]).toMatchObject({ type: 'text', text: 'I wrote notes.txt.', state: 'done' });
    // Two model steps: the call, then the answer.
    expect(parts.filter((p) => p.type === 'step-start')).toHaveLength(2);

    // The model saw the write's result before answering.
    const second = h.model.requests.at(-1)!;
    expect(second.messages.at(-1)).toMatchObject({ role: 'tool', name: 'write' });
  });
});
