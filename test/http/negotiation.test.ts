import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../sessions-api/client.ts';
import { expectError, findNull, invokeBody, rawPost, readFrames, readJson, startHarness, template, type Frame, type Harness } from '../support/harness.ts';

/** Spec §4.1-4.2, §7 and design.md §4 "Stream or batch": who decides batch or stream, and in what wire. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ script: { text: 'Hello there, streaming world.' } });
});
afterAll(async () => h.close());

const body = (extra: Record<string, unknown> = {}) => invokeBody([{ role: 'user', content: 'hi' }], template(), extra);

/** What every native stream promises: bare `{type, data}` frames, turn_start first, one `done`, last. */
function expectNativeStream(frames: Frame[]) {
  for (const frame of frames) {
    expect(Object.keys(frame).sort()).toEqual(['data', 'type']);
    expect(findNull(frame)).toBeUndefined();
  }
  expect(frames[0]!.type).toBe('turn_start');
  expect(frames.filter((f) => f.type === 'done')).toHaveLength(1);
  expect(frames.at(-1)!.type).toBe('done');
}

describe('batch replies', () => {
  it('no Accept header → one JSON reply', async () => {
    const res = await rawPost(`${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`, JSON.stringify(body()), {
      'content-type': 'application/json',
      authorization: `ApiKey ${h.apiKey}`,
    });
    expect(res.headers.accept).toBeUndefined();
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(res.text).data.outputs.stop_reason).toBe('end_turn');
  });

  it.each(['*/*', 'application/json', 'application/*', 'application/json, text/event-stream;q=0.5', 'text/event-stream;q=0.1, application/json'])(
    'Accept %s → JSON',
    async (accept) => {
      const res = await h.invoke(body(), { headers: { accept } });
      expect(res.status).toBe(200);
      const json = await readJson(res);
      expect(json.data.outputs.messages.at(-1)).toEqual({ role: 'assistant', content: 'Hello there, streaming world.' });
    },
  );
});

describe('stream replies', () => {
  it('Accept: text/event-stream → native SSE frames with no terminator', async () => {
    const res = await h.invoke(body(), { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBeNull();
    const { frames, raw } = await readFrames(res);
    expect(raw.startsWith('data: {"type":"turn_start"')).toBe(true);
    expect(raw).not.toContain('[DONE]');
    expect(raw.endsWith('\n\n')).toBe(true);
    expectNativeStream(frames);
    expect(frames.at(-1)!.data).toEqual({ stop_reason: 'end_turn', stopReason: 'end_turn' });
  });

  it.each(['application/x-ndjson', 'application/jsonl'])('Accept: %s → the same frames as NDJSON lines, under the type asked for', async (accept) => {
    const res = await h.invoke(body(), { headers: { accept } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(`${accept}; charset=utf-8`);
    const { frames, raw } = await readFrames(res);
    expect(raw.endsWith('\n')).toBe(true);
    expect(raw).not.toContain('data:');
    expectNativeStream(frames);
    const text = frames.filter((f) => f.type === 'message_delta').map((f) => f.data.delta).join('');
    expect(text).toBe('Hello there, streaming world.');
  });

  it('a type with an unreadable q value is still accepted', async () => {
    const res = await h.invoke(body(), { headers: { accept: 'text/event-stream;q=high' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expectNativeStream((await readFrames(res)).frames);
  });

  it('SSE and NDJSON carry the same frame sequence', async () => {
    const kinds = async (accept: string) => (await readFrames(await h.invoke(body(), { headers: { accept } }))).frames.map((f) => f.type);
    expect(await kinds('text/event-stream')).toEqual(await kinds('application/x-ndjson'));
  });

  it('flags.stream: true with no Accept preference → a stream', async () => {
    const res = await h.invoke(body({ flags: { stream: true } }), { headers: { accept: '*/*' } });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expectNativeStream((await readFrames(res)).frames);
  });

  it('flags.stream: true picks the streaming type Accept allows', async () => {
    const res = await h.invoke(body({ flags: { stream: true } }), { headers: { accept: 'application/json, application/x-ndjson;q=0.5' } });
    expect(res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
  });

  it('a type the client refuses by name (q=0) is not sent, however welcome */* makes the rest', async () => {
    const noJson = await h.invoke(body(), { headers: { accept: '*/*, application/json;q=0' } });
    expect(noJson.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expectNativeStream((await readFrames(noJson)).frames);
    const noSse = await h.invoke(body({ flags: { stream: true } }), { headers: { accept: 'text/event-stream;q=0, */*' } });
    expect(noSse.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    expectNativeStream((await readFrames(noSse)).frames);
  });

  it('flags.stream: false with */* → JSON even though a stream could be sent', async () => {
    const res = await h.invoke(body({ flags: { stream: false } }), { headers: { accept: '*/*' } });
    await readJson(res);
  });
});

describe('406 Not Acceptable', () => {
  it('Accept: application/json + flags.stream: true → 406', async () => {
    const res = await h.invoke(body({ flags: { stream: true } }), { headers: { accept: 'application/json' } });
    await expectError(res, 406, 'not-acceptable', /flags\.stream/);
  });

  it('Accept: application/json + a useChat body → 406 saying the body is what asks for a stream', async () => {
    const chat = { id: 'negotiate-chat', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }], trigger: 'submit-message', data: { parameters: { agent: template() } } };
    await expectError(await h.invoke(chat, { headers: { accept: 'application/json' } }), 406, 'not-acceptable', /the body is useChat's.*set flags\.stream to false/);
  });

  it('Accept: text/event-stream + flags.stream: false → 406', async () => {
    const res = await h.invoke(body({ flags: { stream: false } }), { headers: { accept: 'text/event-stream' } });
    await expectError(res, 406, 'not-acceptable', /application\/json/);
  });

  it.each(['image/png', 'text/html', 'application/json;q=0', '*/*, application/*;q=0, text/*;q=0'])('Accept: %s → 406', async (accept) => {
    await expectError(await h.invoke(body(), { headers: { accept } }), 406, 'not-acceptable');
  });

  it('a 406 runs nothing', async () => {
    h.model.reset();
    await h.invoke(body(), { headers: { accept: 'image/png' } });
    expect(h.model.requests).toHaveLength(0);
  });
});

describe('flags win over headers (spec §4.1)', () => {
  const twoSteps = () => h.model.script([{ text: 'Reading.', toolCalls: [{ name: 'ls', input: {} }] }, { text: 'All done.' }]);
  const agent = template({ tools: [{ type: 'builtin', name: 'ls' }] });
  const run = (flags: Record<string, unknown>, headers: Record<string, string>) =>
    h.invoke(invokeBody([{ role: 'user', content: 'look' }], agent, { flags }), { headers });

  it('x-ag-messages-transcript: full + flags.trim: true → trimmed', async () => {
    twoSteps();
    const json = await readJson(await run({ trim: true }, { 'x-ag-messages-transcript': 'full' }));
    expect(json.data.outputs.messages).toEqual([{ role: 'assistant', content: 'All done.' }]);
  });

  it('x-ag-messages-transcript: last + flags.trim: false → the full turn', async () => {
    twoSteps();
    const json = await readJson(await run({ trim: false }, { 'x-ag-messages-transcript': 'last' }));
    expect(json.data.outputs.messages.map((m: { role: string }) => m.role)).toEqual(['assistant', 'tool', 'tool', 'assistant']);
  });

  it('flags.stream: false beats a streaming Accept that also allows JSON', async () => {
    const res = await h.invoke(body({ flags: { stream: false } }), { headers: { accept: 'text/event-stream, application/json;q=0.1' } });
    await readJson(res);
  });
});

describe('the resume stream (GET …/invoke/{session}/stream) by Accept', () => {
  const streamUrl = (sessionId: string) => `${h.url}/services/agent/v0/invoke/${sessionId}/stream?project_id=${h.projectId}`;
  const get = (sessionId: string, accept?: string) => fetch(streamUrl(sessionId), { headers: { authorization: `ApiKey ${h.apiKey}`, ...(accept ? { accept } : {}) } });

  /** A session whose turn runs until `release` is called: the model answers only then. */
  async function live(sessionId: string): Promise<() => Promise<void>> {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    h.model.script(async () => (await released, { text: 'Hello there, streaming world.' }));
    const reply = h.invoke(body({ session_id: sessionId }), { headers: { accept: 'text/event-stream' } });
    await waitFor(async () => h.model.requests.length > 0, 'the model called');
    return async () => {
      release();
      await (await reply).text();
      h.model.script({ text: 'Hello there, streaming world.' });
    };
  }

  it.each(['application/json', 'image/png'])('Accept: %s → 406, not a stream the client cannot read', async (accept) => {
    h.model.reset();
    const end = await live('resume-json');
    await expectError(await get('resume-json', accept), 406, 'not-acceptable', /stream/);
    await end();
  });

  it.each(['application/x-ndjson', 'application/jsonl'])('Accept: %s → the Vercel chunks as NDJSON lines, under the type asked for', async (accept) => {
    h.model.reset();
    const end = await live('resume-ndjson');
    const res = await get('resume-ndjson', accept);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(`${accept}; charset=utf-8`);
    expect(res.headers.get('x-ag-messages-format')).toBe('vercel');
    const reading = res.text();
    await end();
    const lines = (await reading).trim().split('\n').map((line) => JSON.parse(line) as { type: string });
    expect(lines[0]!.type).toBe('start');
    expect(lines.at(-1)!.type).toBe('finish');
  });

  // The model answers only once `end` releases it: a HEAD that followed the turn would never answer here.
  it('HEAD answers with the stream\'s headers while the turn runs, not once it has ended', async () => {
    h.model.reset();
    const end = await live('resume-head');
    const res = await fetch(streamUrl('resume-head'), { method: 'HEAD', headers: { authorization: `ApiKey ${h.apiKey}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await res.text()).toBe('');
    await end();
  });

  it.each([undefined, '*/*', 'text/event-stream', 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'])('Accept: %s → the Vercel UI message stream as SSE', async (accept) => {
    h.model.reset();
    const end = await live('resume-sse');
    const res = await get('resume-sse', accept);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const reading = res.text();
    await end();
    expect((await reading).endsWith('data: [DONE]\n\n')).toBe(true);
  });
});
