import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError, generateText, isStepCount, jsonSchema, streamText, tool } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { echoScript, startFakeModel } from '../../src/testing/fake-model.ts';
import type { FakeModelServer, RecordedRequest } from '../../src/testing/fake-model.ts';
import { rejection } from '../support/rejection.ts';

const servers: FakeModelServer[] = [];
async function start(...args: Parameters<typeof startFakeModel>): Promise<FakeModelServer> {
  const server = await startFakeModel(...args);
  servers.push(server);
  return server;
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const responses = (s: FakeModelServer) => createOpenAI({ baseURL: s.url, apiKey: 'test' })('gpt-fake');
const chat = (s: FakeModelServer) => createOpenAICompatible({ name: 'fake', baseURL: s.url })('fake-chat');

function post(s: FakeModelServer, path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${s.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer test' },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

function request(messages: RecordedRequest['messages']): RecordedRequest {
  return { protocol: 'chat', path: '/v1/chat/completions', headers: {}, body: {}, stream: false, model: 'm', tools: [], messages };
}

describe('startFakeModel', () => {
  it('binds to loopback on an ephemeral port and serves under /v1', async () => {
    const s = await start();
    expect(s.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const models = await fetch(`${s.url}/models`);
    expect(models.status).toBe(200);
    const missing = await post(s, '/embeddings', {});
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toMatch(/no route/);
  });

  it('records headers, body and normalized messages', async () => {
    const s = await start({ script: { text: 'ok' } });
    await generateText({ model: chat(s), system: 'sys', prompt: 'hello', maxRetries: 0, headers: { 'x-trace': 'abc' } });
    const req = s.requests[0]!;
    expect(req.path).toBe('/v1/chat/completions');
    expect(req.headers['x-trace']).toBe('abc');
    expect(req.body.model).toBe('fake-chat');
    expect(req.messages).toEqual([
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'hello' },
    ]);
  });

  it('consumes an array script one reply per request and then fails loudly', async () => {
    const s = await start({ script: [{ text: 'one' }, { text: 'two' }] });
    expect((await generateText({ model: chat(s), prompt: 'a', maxRetries: 0 })).text).toBe('one');
    expect((await generateText({ model: chat(s), prompt: 'b', maxRetries: 0 })).text).toBe('two');
    const err = await rejection(generateText({ model: chat(s), prompt: 'c', maxRetries: 0 }));
    expect(APICallError.isInstance(err)).toBe(true);
    expect((err as APICallError).statusCode).toBe(500);
    expect((err as APICallError).message).toMatch(/fake model script exhausted/);

    s.script([{ text: 'again' }]);
    expect((await generateText({ model: chat(s), prompt: 'd', maxRetries: 0 })).text).toBe('again');
  });

  it('passes each request to a function script, sync or async', async () => {
    const s = await start({
      script: async (req) => ({ text: `${req.protocol}:${req.messages.at(-1)?.content}` }),
    });
    expect((await generateText({ model: responses(s), prompt: 'ping', maxRetries: 0 })).text).toBe('responses:ping');
    s.script(() => {
      throw new Error('boom');
    });
    const err = await rejection(generateText({ model: chat(s), prompt: 'x', maxRetries: 0 }));
    expect((err as APICallError).statusCode).toBe(500);
    expect((err as APICallError).message).toMatch(/script threw: boom/);
  });

  it('uses a custom error body verbatim', async () => {
    const s = await start({ script: { error: { status: 400, body: { error: { message: 'context too long', type: 'invalid_request_error', code: 'context_length_exceeded' } } } } });
    const err = await rejection(generateText({ model: responses(s), prompt: 'x', maxRetries: 0 }));
    expect((err as APICallError).statusCode).toBe(400);
    expect((err as APICallError).message).toBe('context too long');
  });

  it('waits latencyMs before answering', async () => {
    const s = await start({ script: { text: 'slow', latencyMs: 150 } });
    const started = performance.now();
    const result = await generateText({ model: responses(s), prompt: 'x', maxRetries: 0 });
    expect(result.text).toBe('slow');
    expect(performance.now() - started).toBeGreaterThanOrEqual(145);
  });

  it('spaces stream frames by chunkDelayMs', async () => {
    const s = await start({ script: { text: 'one two three four five six', chunkDelayMs: 20 } });
    const result = streamText({ model: chat(s), prompt: 'x', maxRetries: 0 });
    const arrivals: number[] = [];
    for await (const _ of result.textStream) arrivals.push(performance.now());
    expect(arrivals.length).toBeGreaterThan(1);
    expect(arrivals.at(-1)! - arrivals[0]!).toBeGreaterThanOrEqual(30);
  });

  it('measures concurrency at the model', async () => {
    const s = await start({ script: { text: 'ok', latencyMs: 100 } });
    const calls = Array.from({ length: 6 }, (_, i) => generateText({ model: chat(s), prompt: `call ${i}`, maxRetries: 0 }));
    await Promise.all(calls);
    expect(s.peakInFlight).toBe(6);
    expect(s.inFlight).toBe(0);
    expect(s.requests).toHaveLength(6);

    s.reset();
    expect(s.requests).toHaveLength(0);
    expect(s.peakInFlight).toBe(0);
    await generateText({ model: chat(s), prompt: 'alone', maxRetries: 0 });
    expect(s.peakInFlight).toBe(1);
  });

  it('hangs until the client gives up', async () => {
    const s = await start({ script: { hang: true } });
    const started = performance.now();
    const err = await rejection(generateText({ model: chat(s), prompt: 'x', maxRetries: 0, abortSignal: AbortSignal.timeout(200) }));
    expect((err as Error).name).toMatch(/Abort|Timeout/);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    await expect.poll(() => s.inFlight).toBe(0);
  });

  it('ends hanging requests on close()', async () => {
    const s = await start({ script: { hang: true } });
    const pending = post(s, '/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }] });
    await expect.poll(() => s.inFlight).toBe(1);
    const started = performance.now();
    await s.close();
    expect(performance.now() - started).toBeLessThan(1000);
    await expect(pending).rejects.toThrow();
  });

  it('close() cuts a slow reply short', async () => {
    const s = await start({ script: { text: 'late', latencyMs: 60_000 } });
    const pending = post(s, '/responses', { model: 'm', input: 'x' });
    await expect.poll(() => s.inFlight).toBe(1);
    await s.close();
    await expect(pending).rejects.toThrow();
  });

  it('can skip recording for long benchmarks', async () => {
    const s = await start({ script: { text: 'ok' }, record: false });
    await generateText({ model: chat(s), prompt: 'x', maxRetries: 0 });
    expect(s.requests).toHaveLength(0);
    expect(s.peakInFlight).toBe(1);
  });
});

describe('wire format', () => {
  it('Chat Completions: SSE chunks, usage only on request, [DONE] last', async () => {
    const s = await start({ script: { text: 'hello world', usage: { input: 3, output: 2 } } });
    const read = async (body: object) => (await (await post(s, '/chat/completions', body)).text()).split('\n\n').filter(Boolean);
    const base = { model: 'm', stream: true, messages: [{ role: 'user', content: 'x' }] };

    const withUsage = await read({ ...base, stream_options: { include_usage: true } });
    expect(withUsage.at(-1)).toBe('data: [DONE]');
    const parsed = withUsage.slice(0, -1).map((f) => JSON.parse(f.slice('data: '.length)));
    expect(parsed.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(parsed[0].choices[0].delta.role).toBe('assistant');
    expect(parsed.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('hello world');
    expect(parsed.at(-2).choices[0].finish_reason).toBe('stop');
    expect(parsed.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });

    const without = await read(base);
    expect(without.some((f) => f.includes('"usage"'))).toBe(false);
  });

  it('Responses: event sequence ends with response.completed carrying usage', async () => {
    const s = await start({ script: { text: 'hi', toolCalls: [{ name: 't', input: { q: 1 }, id: 'call_1' }], usage: { input: 4, output: 6 } } });
    const res = await post(s, '/responses', { model: 'm', stream: true, input: [{ role: 'user', content: [{ type: 'input_text', text: 'x' }] }] });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const events = (await res.text()).split('\n\n').filter(Boolean).map((f) => JSON.parse(f.slice('data: '.length)));
    const types = events.map((e) => e.type);
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(types).toContain('response.output_text.delta');
    expect(types).toContain('response.function_call_arguments.delta');
    const call = events.find((e) => e.type === 'response.output_item.done' && e.item.type === 'function_call');
    expect(call.item).toMatchObject({ call_id: 'call_1', name: 't', arguments: '{"q":1}' });
    expect(events.at(-1).response.usage).toMatchObject({ input_tokens: 4, output_tokens: 6, total_tokens: 10 });
  });

  it('Anthropic: error replies use the Anthropic error shape', async () => {
    const s = await start({ script: { error: { status: 529 } } });
    const res = await post(s, '/messages', { model: 'claude', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] });
    expect(res.status).toBe(529);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });
  });

  it('rejects a body that is not JSON', async () => {
    const s = await start();
    const res = await fetch(`${s.url}/chat/completions`, { method: 'POST', body: '{nope' });
    expect(res.status).toBe(400);
  });
});

describe('echoScript', () => {
  it('echoes the last user text', () => {
    expect(echoScript(request([{ role: 'user', content: 'first' }, { role: 'assistant', content: 'You said: first' }, { role: 'user', content: 'second' }]))).toEqual({
      text: 'You said: second',
    });
  });

  it('turns "/tool <name> <json>" into a tool call', () => {
    expect(echoScript(request([{ role: 'user', content: '/tool lookup {"id": 7}' }]))).toEqual({ toolCalls: [{ name: 'lookup', input: { id: 7 } }] });
    expect(echoScript(request([{ role: 'user', content: '/tool now' }]))).toEqual({ toolCalls: [{ name: 'now', input: {} }] });
    expect(echoScript(request([{ role: 'user', content: '/tool bad {x' }])).text).toMatch(/Invalid JSON/);
  });

  it('reports a tool result, truncated to 200 characters', () => {
    const long = 'x'.repeat(500);
    const reply = echoScript(
      request([
        { role: 'user', content: '/tool big {}' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'c1', name: 'big', arguments: '{}', input: {} }] },
        { role: 'tool', content: long, tool_call_id: 'c1', name: 'big' },
      ]),
    );
    expect(reply).toEqual({ text: `Tool big returned: ${'x'.repeat(200)}` });
  });

  it('drives a full tool round trip through a real provider', async () => {
    const s = await start();
    const lookup = tool({
      inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
      execute: async ({ city }) => ({ city, temperature: 21 }),
    });
    for (const model of [responses(s), chat(s)]) {
      const result = await generateText({
        model,
        prompt: '/tool weather {"city":"Oslo"}',
        tools: { weather: lookup },
        stopWhen: isStepCount(3),
        maxRetries: 0,
      });
      expect(result.steps[0]!.toolCalls[0]!.input).toEqual({ city: 'Oslo' });
      expect(result.text).toBe('Tool weather returned: {"city":"Oslo","temperature":21}');
    }
    const plain = await generateText({ model: chat(s), prompt: 'just talk', maxRetries: 0 });
    expect(plain.text).toBe('You said: just talk');
  });
});
