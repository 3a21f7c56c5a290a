import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOf, connectionsApi } from '../connections/client.ts';
import { builtin, invokeBody, readJson, readFrames, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * A turn streams from the model only when somebody reads it as it is written: a JSON reply makes
 * non-streaming calls (a third of the CPU, BENCHMARKS.md), a streamed reply streams, and both give
 * the same output — including a tool step and its result.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const agent = template({ tools: [builtin('ls')] });
const script = () => h.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }, { text: 'The folder is empty.' }]);

describe('model calls', () => {
  it('are not streamed for a JSON reply, and are for a streamed one, with the same output', async () => {
    script();
    h.model.reset();
    const jsonSession = sid('json');
    const json = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'list' }], agent, { session_id: jsonSession })));
    expect(h.model.requests.map((r) => r.stream)).toEqual([false, false]);

    script();
    h.model.reset();
    const sseSession = sid('sse');
    const { frames } = await readFrames(await h.invoke(invokeBody([{ role: 'user', content: 'list' }], agent, { session_id: sseSession }), { headers: { accept: 'text/event-stream' } }));
    expect(h.model.requests.map((r) => r.stream)).toEqual([true, true]);

    expect(frames.map((f) => f.type)).toEqual(expect.arrayContaining(['tool_call', 'tool_result', 'message_delta', 'done']));
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(json.data.outputs.messages.at(-1)).toEqual({ role: 'assistant', content: 'The folder is empty.' });
    // The same turn either way, but for the ids the model minted.
    const stored = async (session: string) => (await h.store.turns.listForSession(h.projectId, session, { limit: 1 }))[0]!;
    const [viaJson, viaStream] = await Promise.all([stored(jsonSession), stored(sseSession)]);
    const withoutIds = (turn: typeof viaJson) => JSON.stringify(turn.output).replace(/"tool_call_id":"[^"]+"/g, '');
    expect(withoutIds(viaJson)).toBe(withoutIds(viaStream));
    expect(viaJson.stop_reason).toBe(viaStream.stop_reason);
  });
});

/**
 * A model server that speaks one way only: every call is forwarded to the fake model with `stream`
 * set to `streams`, or, with `refuse`, a call that asks otherwise is answered 400. `asked` records
 * what each call asked for.
 */
async function oneWayProxy(target: string, streams: boolean, refuse = false): Promise<{ url: string; server: Server; asked: boolean[] }> {
  const asked: boolean[] = [];
  const server = createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const stream = JSON.parse(raw).stream === true;
    asked.push(stream);
    if (refuse && stream !== streams) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'only streaming is supported', type: 'invalid_request_error' } }));
      return;
    }
    const upstream = await fetch(`${target}${req.url!.replace(/^\/v1/, '')}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: req.headers.authorization ?? '' },
      body: JSON.stringify({ ...JSON.parse(raw), stream: streams }),
    });
    res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
    res.end(await upstream.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`, server, asked };
}

describe('a model server that only streams', () => {
  it('still answers JSON turns: the turn starts over streaming, and that endpoint is streamed after', async () => {
    const upstream = await startHarness();
    const proxy = await oneWayProxy(upstream.model.url, true);
    const onlyStreams = await startHarness({ env: { OPENAI_BASE_URL: proxy.url, AGENTD_DEFAULT_MODEL: 'stream-only-model' } });
    try {
      const streamOnlyAgent = { ...template(), llm: { provider: 'openai', model: 'stream-only-model' } };
      for (const text of ['first answer', 'second answer']) {
        upstream.model.script({ text });
        const json = await readJson(await onlyStreams.invoke(invokeBody([{ role: 'user', content: 'hi' }], streamOnlyAgent, { session_id: sid('only') })));
        expect(json.data.outputs.messages.at(-1)).toEqual({ role: 'assistant', content: text });
      }
      // The first turn's non-streaming call failed and was made again streaming; the second went straight to streaming.
      expect(upstream.model.requests).toHaveLength(3);
    } finally {
      await onlyStreams.close();
      proxy.server.close();
      await upstream.close();
    }
  });

  it('still answers JSON turns when the server refuses non-streaming calls', async () => {
    const upstream = await startHarness();
    const proxy = await oneWayProxy(upstream.model.url, true, true);
    const refusing = await startHarness({ env: { OPENAI_BASE_URL: proxy.url } });
    try {
      upstream.model.script({ text: 'streamed after all' });
      const json = await readJson(await refusing.invoke(invokeBody([{ role: 'user', content: 'hi' }], template(), { session_id: sid('refused') })));
      expect(json.data.outputs.messages.at(-1)).toEqual({ role: 'assistant', content: 'streamed after all' });
      expect(upstream.model.requests.map((r) => r.stream)).toEqual([true]);
    } finally {
      await refusing.close();
      proxy.server.close();
      await upstream.close();
    }
  });
});

describe('a model server that never streams', () => {
  it('still streams turns: one JSON answer per step, retold as a stream, and that endpoint is not asked to stream again', async () => {
    const upstream = await startHarness();
    const proxy = await oneWayProxy(upstream.model.url, false);
    const neverStreams = await startHarness({ env: { OPENAI_BASE_URL: proxy.url } });
    try {
      // The model name the other servers of this file use too: what is learnt is kept per server.
      const jsonOnlyAgent = { ...template({ tools: [builtin('ls')] }), llm: { provider: 'openai', model: 'fake-model' } };
      // The first answer is given twice: once to the streaming call that is dropped, once to its retry.
      const call = { toolCalls: [{ name: 'ls', input: {} }] };
      upstream.model.script([call, call, { text: 'The folder is empty.' }, { text: 'Still empty.' }]);
      const first = await readFrames(await neverStreams.invoke(invokeBody([{ role: 'user', content: 'list' }], jsonOnlyAgent, { session_id: sid('never') }), { headers: { accept: 'text/event-stream' } }));
      expect(first.frames.map((f) => f.type)).toEqual(expect.arrayContaining(['tool_call', 'tool_result', 'message_delta']));
      expect(first.frames.filter((f) => f.type === 'message_delta').map((f) => f.data.delta).join('')).toBe('The folder is empty.');
      expect(first.frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'end_turn' } });
      // The first streaming call's JSON answer was dropped and asked for again without streaming.
      expect(proxy.asked).toEqual([true, false, false]);

      const second = await readFrames(await neverStreams.invoke(invokeBody([{ role: 'user', content: 'again' }], jsonOnlyAgent, { session_id: sid('never') }), { headers: { accept: 'text/event-stream' } }));
      expect(second.frames.filter((f) => f.type === 'message_delta').map((f) => f.data.delta).join('')).toBe('Still empty.');
      expect(proxy.asked).toEqual([true, false, false, false]);

      // Another server of the same agentd, with the same model name, still streams.
      const admin = await adminOf(neverStreams);
      const created = await connectionsApi(neverStreams, 'POST', '', { as: admin, body: { slug: 'streams', provider: 'openai', base_url: upstream.model.url, api_key: 'sk-streams-1234' } });
      expect(created.status).toBe(201);
      upstream.model.reset();
      upstream.model.script({ text: 'streamed' });
      const viaConnection = { ...jsonOnlyAgent, llm: { model: 'fake-model', connection: { mode: 'project', slug: 'streams' } } };
      await readFrames(await neverStreams.invoke(invokeBody([{ role: 'user', content: 'hi' }], viaConnection, { session_id: sid('still-streams') }), { headers: { accept: 'text/event-stream' } }));
      expect(upstream.model.requests.map((r) => r.stream)).toEqual([true]);
    } finally {
      await neverStreams.close();
      proxy.server.close();
      await upstream.close();
    }
  });
});
