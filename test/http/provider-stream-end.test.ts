import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invokeBody, readFrames, startHarness, type Harness } from '../support/harness.ts';

/**
 * src/agent/sse-end.ts: a server (or a proxy in front of it) that sends a whole answer, its last
 * event included, and keeps the body open. The turn ends with the answer, not with 504 once
 * AGENTD_MODEL_TIMEOUT_MS has passed. And the other way round: a body that closes before the last
 * event is an answer broken off, not a whole one.
 */

const TEXT = 'Hé😀llo — wörld 你好';
let upstream: Server;
let h: Harness;

function responsesEvents(complete = true): string {
  const response = (extra: Record<string, unknown> = {}) => ({ id: 'resp_1', object: 'response', created_at: 1, status: 'in_progress', model: 'm', output: [], ...extra });
  const events = [
    { type: 'response.created', response: response() },
    { type: 'response.output_item.added', output_index: 0, item: { id: 'msg_1', type: 'message', status: 'in_progress', role: 'assistant', content: [] } },
    { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 0, content_index: 0, delta: TEXT, logprobs: [] },
    { type: 'response.output_item.done', output_index: 0, item: { id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: TEXT, annotations: [] }] } },
    ...(complete ? [{ type: 'response.completed', response: response({ status: 'completed', usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } }) }] : []),
  ];
  return events.map((e, i) => `event: ${e.type}\ndata: ${JSON.stringify({ ...e, sequence_number: i })}\n\n`).join('');
}

function chatEvents(): string {
  const chunk = (delta: Record<string, unknown>, finish: string | null) => ({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] });
  const chunks = [chunk({ role: 'assistant', content: TEXT }, null), chunk({}, 'stop'), { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }];
  return chunks.map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`).join('') + 'data: [DONE]\r\n\r\n';
}

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (!req.url!.endsWith('/responses') && !req.url!.endsWith('/chat/completions')) {
        res.writeHead(404);
        return res.end();
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // Cut short: the answer's text, and the body closed without the event that completes it.
      if ((JSON.parse(body) as { model: string }).model === 'cut') return res.end(responsesEvents(false));
      // The whole answer, and then nothing: the body is never ended.
      res.write(req.url!.endsWith('/responses') ? responsesEvents() : chatEvents());
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
  h = await startHarness({ env: { OPENAI_BASE_URL: url, OLLAMA_BASE_URL: url, AGENTD_MODEL_TIMEOUT_MS: '3000' } });
});
afterAll(async () => {
  await h?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
});

describe('a stream whose body stays open after its last event', () => {
  it.each([['openai'], ['ollama']])('%s: the turn ends with the answer, at once', async (provider) => {
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], { llm: { provider, model: 'm' }, tools: [] }), { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    const { frames } = await readFrames(res);
    const text = frames.filter((f) => f.type === 'message_delta').map((f) => (f.data as { delta: string }).delta).join('');
    expect(text).toBe(TEXT);
    expect(frames.map((f) => f.type)).not.toContain('error');
    expect(frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'end_turn' } });
    expect(frames.find((f) => f.type === 'usage')?.data).toMatchObject({ input: 3, output: 2 });
  });
});

describe('a stream whose body closes before its last event', () => {
  it('is an answer broken off: its text is told, then the error, and the turn is stored failed', async () => {
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], { llm: { provider: 'openai', model: 'cut' }, tools: [] }, { session_id: 'cut-short' }), { headers: { accept: 'text/event-stream' } });
    const { frames } = await readFrames(res);
    expect(frames.filter((f) => f.type === 'message_delta').map((f) => (f.data as { delta: string }).delta).join('')).toBe(TEXT);
    expect(frames.find((f) => f.type === 'error')?.data).toMatchObject({ code: 502, message: expect.stringMatching(/broke off/) });
    const [turn] = await h.store.turns.listForSession(h.projectId, 'cut-short', { limit: 1 });
    expect(turn).toMatchObject({ status: 'failed', error: { type: 'upstream-error' } });
  });
});
