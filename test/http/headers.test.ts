import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, invokeBody, readFrames, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/** Spec §4.1 response headers, trace context and session id resolution. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ script: { text: 'ok' } });
});
afterAll(async () => h.close());

const body = (extra: Record<string, unknown> = {}) => invokeBody([{ role: 'user', content: 'hi' }], template(), extra);
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

function runHeaders(res: Response) {
  return {
    version: res.headers.get('x-ag-version'),
    trace: res.headers.get('x-ag-trace-id'),
    span: res.headers.get('x-ag-span-id'),
    traceparent: res.headers.get('traceparent'),
    session: res.headers.get('x-ag-session-id'),
    baggage: res.headers.get('baggage'),
  };
}

describe('response headers', () => {
  it('a JSON reply carries version, trace, span, traceparent, session and baggage, matching the body', async () => {
    const res = await h.invoke(body({ session_id: 'sess.1:a_b-c' }));
    const json = await readJson(res);
    const hd = runHeaders(res);
    expect(hd.version).toBe('2025.07.14');
    expect(hd.trace).toMatch(/^[0-9a-f]{32}$/);
    expect(hd.span).toMatch(/^[0-9a-f]{16}$/);
    expect(hd.traceparent).toBe(`00-${hd.trace}-${hd.span}-01`);
    expect(json.trace_id).toBe(hd.trace);
    expect(json.span_id).toBe(hd.span);
    expect(hd.session).toBe('sess.1:a_b-c');
    expect(json.session_id).toBe('sess.1:a_b-c');
    expect(hd.baggage).toBe('ag.session.id=sess.1:a_b-c');
  });

  it('a stream carries the same headers, and its turn_start frame names the same trace and session', async () => {
    const res = await h.invoke(body({ session_id: 'streamed-1' }), { headers: { accept: 'text/event-stream' } });
    const hd = runHeaders(res);
    expect(hd.version).toBe('2025.07.14');
    expect(hd.traceparent).toBe(`00-${hd.trace}-${hd.span}-01`);
    expect(hd.session).toBe('streamed-1');
    expect(hd.baggage).toContain('ag.session.id=streamed-1');
    const { frames } = await readFrames(res);
    expect(frames[0]!.data).toMatchObject({ session_id: 'streamed-1', trace_id: hd.trace });
  });

  it('x-ag-version is on errors too, before and after auth, and on the /api surface', async () => {
    const unauth = await fetch(`${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(unauth.headers.get('x-ag-version')).toBe('2025.07.14');
    await expectError(unauth, 401);
    const bad = await h.invoke({ session_id: 'a b' });
    expect(bad.headers.get('x-ag-version')).toBe('2025.07.14');
    const notFound = await fetch(`${h.url}/nope`);
    expect(notFound.headers.get('x-ag-version')).toBe('2025.07.14');
    const api = await fetch(`${h.url}/api/sessions/interactions/query?project_id=${h.projectId}`, {
      method: 'POST',
      body: '{}',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${h.apiKey}` },
    });
    expect(api.status).toBe(200);
    expect(api.headers.get('x-ag-version')).toBe('2025.07.14');
  });

  it('a JSON reply in the Vercel format says so, as docs/api.md promises; a native one does not', async () => {
    const vercel = await h.invoke(body(), { headers: { accept: 'application/json', 'x-ag-messages-format': 'vercel' } });
    const json = await readJson(vercel);
    expect(json.data.outputs.messages[0]).toHaveProperty('parts');
    expect(vercel.headers.get('x-ag-messages-format')).toBe('vercel');
    expect(vercel.headers.get('x-ag-messages-version')).toBe('v1');
    // Not the SSE stream: that header tells an AI SDK client to read the body as one.
    expect(vercel.headers.get('x-vercel-ai-ui-message-stream')).toBeNull();
    const native = await h.invoke(body(), { headers: { accept: 'application/json' } });
    await readJson(native);
    expect(native.headers.get('x-ag-messages-format')).toBeNull();
    expect(native.headers.get('x-ag-messages-version')).toBeNull();
  });

  it('an error once the session is known still names it', async () => {
    const res = await h.invoke({ session_id: 'known-1', data: { inputs: { messages: [] } } });
    const json = await expectError(res, 400, 'invalid-messages');
    expect(json.session_id).toBe('known-1');
    expect(res.headers.get('x-ag-session-id')).toBe('known-1');
  });
});

describe('trace context', () => {
  it('a request traceparent is continued: same trace id, a new span id, the parent recorded', async () => {
    const session = sid('trace');
    const res = await h.invoke(body({ session_id: session }), { headers: { traceparent: `00-${TRACE}-${PARENT}-01` } });
    const json = await readJson(res);
    expect(json.trace_id).toBe(TRACE);
    expect(json.span_id).toMatch(/^[0-9a-f]{16}$/);
    expect(json.span_id).not.toBe(PARENT);
    expect(res.headers.get('traceparent')).toBe(`00-${TRACE}-${json.span_id}-01`);
    const [turn] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(turn).toMatchObject({ trace_id: TRACE, span_id: json.span_id, parent_span_id: PARENT });
  });

  it('data.trace.traceparent is continued the same way', async () => {
    const res = await h.invoke({ ...body(), data: { ...body().data, trace: { traceparent: `00-${TRACE}-${PARENT}-01` } } });
    const json = await readJson(res);
    expect(json.trace_id).toBe(TRACE);
    expect(json.span_id).not.toBe(PARENT);
  });

  it('data.trace {trace_id, span_id} is continued too', async () => {
    const res = await h.invoke({ ...body(), data: { ...body().data, trace: { trace_id: TRACE, span_id: PARENT } } });
    expect((await readJson(res)).trace_id).toBe(TRACE);
  });

  it('an invalid traceparent starts a new trace instead of failing', async () => {
    for (const bad of ['garbage', `00-${'0'.repeat(32)}-${PARENT}-01`, `ff-${TRACE}-${PARENT}-01`]) {
      const res = await h.invoke(body(), { headers: { traceparent: bad } });
      const json = await readJson(res);
      expect(json.trace_id).toMatch(/^[0-9a-f]{32}$/);
      expect(json.trace_id).not.toBe(TRACE);
    }
  });

  it('every run gets its own trace when none is given', async () => {
    const a = await readJson(await h.invoke(body()));
    const b = await readJson(await h.invoke(body()));
    expect(a.trace_id).not.toBe(b.trace_id);
  });
});

describe('session id resolution (spec §4.1, §4.7)', () => {
  it('is minted when absent, returned in body and header, and differs per request', async () => {
    const a = await h.invoke(body());
    const b = await h.invoke(body());
    const ja = await readJson(a);
    const jb = await readJson(b);
    expect(ja.session_id).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
    expect(a.headers.get('x-ag-session-id')).toBe(ja.session_id);
    expect(b.headers.get('x-ag-session-id')).toBe(jb.session_id);
    expect(ja.session_id).not.toBe(jb.session_id);
  });

  it('comes from x-ag-session-id when the body has none', async () => {
    const res = await h.invoke(body(), { headers: { 'x-ag-session-id': 'from-header' } });
    expect((await readJson(res)).session_id).toBe('from-header');
    expect(res.headers.get('x-ag-session-id')).toBe('from-header');
  });

  it('comes from baggage ag.session.id when neither body nor x-ag-session-id has one', async () => {
    const res = await h.invoke(body(), { headers: { baggage: 'other=1, ag.session.id=from-baggage;prop=x' } });
    expect((await readJson(res)).session_id).toBe('from-baggage');
  });

  it('the body wins over the header', async () => {
    const res = await h.invoke(body({ session_id: 'from-body' }), { headers: { 'x-ag-session-id': 'from-header' } });
    expect((await readJson(res)).session_id).toBe('from-body');
    expect(res.headers.get('x-ag-session-id')).toBe('from-body');
  });

  it('a body session_id of null falls back to the header', async () => {
    const res = await h.invoke(body({ session_id: null }), { headers: { 'x-ag-session-id': 'null-fallback' } });
    expect((await readJson(res)).session_id).toBe('null-fallback');
  });
});

describe('what is recorded on the turn', () => {
  it('tags, meta and links are stored with the turn; secrets are not', async () => {
    const session = sid('rec');
    const tags = { env: 'test', team: 'core' };
    const meta = { attempt: 2, nested: { a: [1, 2] } };
    const links = { parent: { trace_id: TRACE, span_id: PARENT } };
    const res = await h.invoke(body({ session_id: session, tags, meta, links, secrets: { SOME_TOKEN: 'tok-abcdef-123' } }));
    const json = await readJson(res);
    const turns = await h.store.turns.listForSession(h.projectId, session, { limit: 5 });
    expect(turns).toHaveLength(1);
    expect(turns[0]!.id).toBe(json.turn_id);
    expect(turns[0]!.request).toMatchObject({ version: '2025.07.14', tags, meta, links });
    expect(JSON.stringify(turns[0])).not.toContain('tok-abcdef-123');
    expect(turns[0]).toMatchObject({ status: 'completed', stop_reason: 'end_turn', trace_id: json.trace_id, span_id: json.span_id });
  });
});
