import type { UIMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { messageChunks } from '../../src/stream/message-chunks.ts';
import { checkChunks, overTheWire, readFinal } from '../support/sdk-client.ts';

/** Every kind of part a paused assistant message can hold, each tool part in another state. */
const message: UIMessage = {
  id: 'asst_9',
  role: 'assistant',
  metadata: { session_id: 's' },
  parts: [
    { type: 'step-start' },
    { type: 'reasoning', id: 'r1', text: 'thinking it over', state: 'done' },
    { type: 'text', text: 'Let me look.', state: 'done', providerMetadata: { openai: { itemId: 'msg_1' } } },
    { type: 'tool-ls', toolCallId: 'c1', state: 'output-available', input: { path: '.' }, output: 'a.txt' },
    { type: 'tool-read', toolCallId: 'c2', state: 'output-error', input: { path: 'nope' }, errorText: 'no such file' },
    { type: 'step-start' },
    { type: 'source-url', sourceId: 'src1', url: 'https://example.com', title: 'Example' },
    { type: 'file', mediaType: 'image/png', url: 'data:image/png;base64,AAAA' },
    { type: 'data-progress', id: 'p1', data: { done: 2 } },
    { type: 'tool-write', toolCallId: 'c3', state: 'approval-responded', input: { path: 'b.txt', content: 'B' }, approval: { id: 'int-1', approved: true } },
    { type: 'tool-write', toolCallId: 'c4', state: 'output-denied', input: { path: 'c.txt', content: 'C' }, approval: { id: 'int-2', approved: false, reason: 'not that one' } },
    { type: 'tool-bash', toolCallId: 'c5', state: 'approval-requested', input: { command: 'ls' }, approval: { id: 'int-3' } },
    { type: 'dynamic-tool', toolName: 'docs__search', toolCallId: 'c6', state: 'input-available', input: { q: 'x' }, title: 'Search the docs' },
  ],
};

describe('messageChunks: a message rebuilt from nothing by the AI SDK client', () => {
  it('every chunk passes the SDK schema and the SDK builds the same parts again', async () => {
    const chunks = [{ type: 'start' as const, messageId: message.id }, ...messageChunks(message), { type: 'finish' as const }];
    await checkChunks(chunks);
    const { message: rebuilt, errors } = await readFinal(await overTheWire(chunks));
    expect(errors).toEqual([]);
    expect(rebuilt?.id).toBe(message.id);
    // The SDK leaves keys it has no value for as `undefined`; as JSON (how a chat saves it) the
    // message is the same.
    expect(JSON.parse(JSON.stringify(rebuilt?.parts))).toEqual(message.parts);
  });

  it('closes every step it opens', () => {
    const types = messageChunks(message).map((c) => c.type).filter((t) => t.endsWith('-step'));
    expect(types).toEqual(['start-step', 'finish-step', 'start-step', 'finish-step']);
  });
});
