import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, expectError, invokeBody, readFrames, sid, startHarness, type Harness } from '../support/harness.ts';

/**
 * src/agent/model-errors.ts and model-call.ts against what real providers send, from a loopback
 * server of the test's own (the fake model never sends these): an error event inside a stream that
 * has begun (OpenAI's `error` and `response.failed`, Anthropic's `overloaded_error`, an
 * OpenAI-compatible server's `{"error": …}` chunk) must say what the provider said, with the
 * status it means, and an HTML page answering with 200 (a proxy's login page) is no empty answer.
 */

type Reply = (res: import('node:http').ServerResponse, body: { model?: string; stream?: boolean }) => void;

const sse = (events: Array<Record<string, unknown>>, named = true) =>
  events.map((e) => `${named ? `event: ${String(e.type)}\n` : ''}data: ${JSON.stringify(e)}\n\n`).join('');

const response = (extra: Record<string, unknown> = {}) => ({ id: 'resp_1', object: 'response', created_at: 1, status: 'in_progress', model: 'm', output: [], ...extra });

/** The Responses API: a message begins with "partial ", then the stream carries `tail`. */
function responsesWith(tail: Array<Record<string, unknown>>): string {
  let seq = 0;
  const events: Array<Record<string, unknown>> = [
    { type: 'response.created', response: response() },
    { type: 'response.in_progress', response: response() },
    { type: 'response.output_item.added', output_index: 0, item: { id: 'msg_1', type: 'message', status: 'in_progress', role: 'assistant', content: [] } },
    { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'partial ', logprobs: [] },
    ...tail,
  ];
  return sse(events.map((e) => ({ ...e, sequence_number: seq++ })));
}

const replies: Record<string, Reply> = {
  'openai-error-event': (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(responsesWith([{ type: 'error', code: 'server_error', message: 'Something broke mid-stream', param: null }]));
  },
  'openai-response-failed': (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(responsesWith([{ type: 'response.failed', response: response({ status: 'failed', error: { code: 'server_error', message: 'The model failed mid-way' } }) }]));
  },
  'openai-rate-limit-event': (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(responsesWith([{ type: 'error', code: 'rate_limit_exceeded', message: 'Rate limit reached in stream', param: null }]));
  },
  'openai-call-then-error': (res) => {
    const args = JSON.stringify({ path: 'before-error.txt', content: 'written' });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(
      responsesWith([
        { type: 'response.output_text.done', item_id: 'msg_1', output_index: 0, content_index: 0, text: 'partial ', logprobs: [] },
        { type: 'response.output_item.done', output_index: 0, item: { id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'partial ', annotations: [] }] } },
        { type: 'response.output_item.added', output_index: 1, item: { id: 'fc_1', type: 'function_call', call_id: 'call_1', name: 'write', arguments: '', status: 'in_progress' } },
        { type: 'response.function_call_arguments.delta', item_id: 'fc_1', output_index: 1, delta: args },
        { type: 'response.output_item.done', output_index: 1, item: { id: 'fc_1', type: 'function_call', call_id: 'call_1', name: 'write', arguments: args, status: 'completed' } },
        { type: 'error', code: 'server_error', message: 'Broke after the call', param: null },
      ]),
    );
  },
  'anthropic-overloaded': (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(
      sse([
        { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], model: 'c', stop_reason: null, stop_sequence: null, usage: { input_tokens: 3, output_tokens: 1 } } },
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        { type: 'ping' },
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'partial ' } },
        { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
      ]),
    );
  },
  'flaky-json': (res, body) => {
    flakyCalls.push(body.stream === true);
    if (flakyCalls.length <= 1) {
      // A gateway's hiccup: a broken JSON body with 200 to a call made without streaming.
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end('{"oops": ');
    }
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify(response({ status: 'completed', output: [{ id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'fine', annotations: [] }] }], usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 } })));
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(responsesWith([{ type: 'response.completed', response: response({ status: 'completed', usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 } }) }]));
  },
  'rate-limit-ms': (res) => {
    // OpenAI's own header: milliseconds, and no `retry-after`.
    res.writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '1500' });
    res.end(JSON.stringify({ error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' } }));
  },
  'rate-limit-date': (res) => {
    res.writeHead(429, { 'content-type': 'application/json', 'retry-after': 'Wed, 21 Oct 2037 07:28:00 GMT' });
    res.end(JSON.stringify({ error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' } }));
  },
  'html-login-page': (res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><html><body>Please sign in to the proxy</body></html>');
  },
  'compatible-error-then-more': (res) => {
    // Chat Completions: an error chunk, and the server streams on regardless until agentd hangs up.
    const chunk = (delta: Record<string, unknown>) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(chunk({ role: 'assistant', content: 'partial ' }));
    res.write(`data: ${JSON.stringify({ error: { message: 'Broke, and kept talking', type: 'server_error' } })}\n\n`);
    const more = () => {
      if (res.destroyed) return;
      for (let i = 0; i < 4; i++) res.write(chunk({ content: 'more ' }));
      setTimeout(more, 1);
    };
    more();
    res.once('close', () => res.destroy());
  },
  'html-bad-gateway': (res) => {
    res.writeHead(502, { 'content-type': 'text/html' });
    res.end('<html><body><h1>502 Bad Gateway</h1></body></html>');
  },
};

/** Scenarios that answer a call made without streaming as they answer a streamed one. */
const ANSWERS_ANY_CALL = new Set(['html-login-page', 'html-bad-gateway', 'flaky-json', 'rate-limit-ms', 'rate-limit-date']);
/** Whether each call of the `flaky-json` scenario asked to stream. */
const flakyCalls: boolean[] = [];
let upstream: Server;
let upstreamUrl: string;
let h: Harness;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}') as { model?: string; stream?: boolean };
      const reply = replies[body.model ?? ''];
      if (!reply) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: { message: `no scenario ${body.model}`, type: 'not_found' } }));
      }
      // A non-streaming call (a JSON reply) is refused, as a server that only streams refuses it.
      if (!body.stream && !ANSWERS_ANY_CALL.has(body.model ?? '')) {
        res.writeHead(400, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: { message: 'stream must be true', type: 'invalid_request_error' } }));
      }
      reply(res, body);
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  h = await startHarness({
    env: { OPENAI_BASE_URL: `${upstreamUrl}/v1`, ANTHROPIC_BASE_URL: upstreamUrl, ANTHROPIC_API_KEY: 'ak-test', AGENTD_OPENAI_COMPATIBLE: JSON.stringify({ upstream: { base_url: `${upstreamUrl}/v1` } }) },
  });
});
afterAll(async () => {
  await h?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
});

const agent = (model: string, provider = 'openai') => ({ llm: { provider, model }, tools: [builtin('read'), builtin('write')], runner: { permissions: { default: 'allow' } } });
const turn = (model: string, provider?: string, extra: Record<string, unknown> = {}) => invokeBody([{ role: 'user', content: 'go' }], agent(model, provider), extra);

async function streamed(model: string, provider?: string) {
  const res = await h.invoke(turn(model, provider), { headers: { accept: 'text/event-stream' } });
  expect(res.status).toBe(200);
  const { frames } = await readFrames(res);
  const types = frames.map((f) => f.type);
  expect(types.slice(-2)).toEqual(['error', 'done']);
  const text = frames.filter((f) => f.type === 'message_delta').map((f) => (f.data as { delta: string }).delta).join('');
  return { error: frames.at(-2)!.data as { code: number; type: string; message: string }, text };
}

describe('an error event in a stream that has begun', () => {
  it("OpenAI's `error` event: the provider's message, never [object Object]", async () => {
    const { error, text } = await streamed('openai-error-event');
    expect(text).toBe('partial ');
    expect(error).toMatchObject({ code: 502, type: 'upstream-error' });
    expect(error.message).toContain('Something broke mid-stream');
    expect(error.message).not.toContain('[object Object]');
  });

  it("OpenAI's `response.failed`: the provider's message", async () => {
    const { error } = await streamed('openai-response-failed');
    expect(error).toMatchObject({ code: 502, type: 'upstream-error' });
    expect(error.message).toContain('The model failed mid-way');
  });

  it('a rate limit told inside the stream is a rate limit (429)', async () => {
    const { error } = await streamed('openai-rate-limit-event');
    expect(error).toMatchObject({ code: 429, type: 'upstream-rate-limited' });
    expect(error.message).toContain('Rate limit reached in stream');
  });

  it("Anthropic's `overloaded_error` event: a gateway error that says so", async () => {
    const { error, text } = await streamed('anthropic-overloaded', 'anthropic');
    expect(text).toBe('partial ');
    expect(error).toMatchObject({ code: 502, type: 'upstream-error' });
    expect(error.message).toMatch(/overloaded/i);
  });

  it('the stored turn keeps the same error and what was said, and the session goes on', async () => {
    const session = sid('stream-error');
    const res = await h.invoke(turn('openai-error-event', 'openai', { session_id: session }), { headers: { accept: 'application/x-ndjson' } });
    await res.text();
    const [record] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(record).toMatchObject({ status: 'failed', stop_reason: 'error', error: { code: 502, type: 'upstream-error' } });
    expect(JSON.stringify(record!.error)).toContain('Something broke mid-stream');
  });
});

describe('an answer the turn stops reading while the server still sends it', () => {
  it('the turn fails with what the server said, the connection is let go, and the server serves on', async () => {
    const llm = { provider: 'openai-compatible', model: 'compatible-error-then-more', connection: { mode: 'self_managed', slug: 'upstream' } };
    for (let i = 0; i < 5; i++) {
      const res = await h.invoke(invokeBody([{ role: 'user', content: 'go' }], { ...agent(''), llm }), { headers: { accept: 'text/event-stream' } });
      const { frames } = await readFrames(res);
      expect(frames.at(-2)).toMatchObject({ type: 'error', data: { type: 'upstream-error' } });
      expect((frames.at(-2)!.data as { message: string }).message).toContain('Broke, and kept talking');
    }
    expect((await fetch(`${h.url}/health`)).status).toBe(200);
  });
});

describe('a stream that breaks after a call has started', () => {
  it('the call ran once, and its result is told and kept before the error', async () => {
    const session = sid('call-then-error');
    const res = await h.invoke(turn('openai-call-then-error', 'openai', { session_id: session }), { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    const { frames } = await readFrames(res);
    const types = frames.map((f) => f.type);
    expect(types.filter((t) => t === 'tool_call')).toHaveLength(1);
    expect(types.filter((t) => t === 'tool_result')).toHaveLength(1);
    expect(types.indexOf('tool_result')).toBeLessThan(types.indexOf('error'));
    expect(frames.find((f) => f.type === 'tool_result')!.data).toMatchObject({ id: 'call_1', is_error: false });
    expect(types.slice(-2)).toEqual(['error', 'done']);
    expect(await readFile(path.join(h.sessionDir(session), 'before-error.txt'), 'utf8')).toBe('written');
    const [record] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(record).toMatchObject({ status: 'failed', error: { type: 'upstream-error' } });
    const messages = (record!.output as unknown as { messages: Array<{ role: string; tool_call_id?: string; tool_name?: string }> }).messages;
    expect(messages.filter((m) => m.tool_call_id === 'call_1' && !m.tool_name)).toHaveLength(1);
  });
});

describe('an HTML page answering with 200', () => {
  it('a streamed turn → 502 upstream-error, not an empty answer', async () => {
    await expectError(await h.invoke(turn('html-login-page'), { headers: { accept: 'text/event-stream' } }), 502, 'upstream-error', /HTML/);
  });

  it('a JSON turn → 502 upstream-error, and the endpoint is not taken for one that only streams', async () => {
    await expectError(await h.invoke(turn('html-login-page')), 502, 'upstream-error');
    await expectError(await h.invoke(turn('html-login-page', 'anthropic')), 502, 'upstream-error');
  });

  it("a proxy's HTML error page says what it was, where a provider's error would give its reason", async () => {
    await expectError(await h.invoke(turn('html-bad-gateway')), 502, 'upstream-error', /failed \(HTTP 502\): no reason given, only a text\/html page$/);
  });
});

describe('what a broken answer teaches about a server', () => {
  it('a JSON body that does not parse does not make agentd stop streaming from that server', async () => {
    // The broken answer itself fails its turn, as any unreadable answer does.
    await expectError(await h.invoke(turn('flaky-json')), 502, 'upstream-error');
    // The server has recovered: a streamed turn is streamed from it, not asked without streaming.
    const before = flakyCalls.length;
    const { frames } = await readFrames(await h.invoke(turn('flaky-json'), { headers: { accept: 'text/event-stream' } }));
    expect(frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'end_turn' } });
    expect(flakyCalls.slice(before)).toEqual([true]);
  });
});

describe('a rate limit', () => {
  it("OpenAI's retry-after-ms is passed on as retry-after, in whole seconds", async () => {
    const res = await h.invoke(turn('rate-limit-ms'));
    await expectError(res, 429, 'upstream-rate-limited', /retry after 2 s/);
    expect(res.headers.get('retry-after')).toBe('2');
  });

  it('a retry-after that is a date is passed on as it is, and said as a date', async () => {
    const res = await h.invoke(turn('rate-limit-date'));
    const body = await expectError(res, 429, 'upstream-rate-limited', /retry after Wed, 21 Oct 2037 07:28:00 GMT/);
    expect(body.status.message).not.toMatch(/GMT s\b/);
    expect(res.headers.get('retry-after')).toBe('Wed, 21 Oct 2037 07:28:00 GMT');
  });
});
