import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { builtin, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * How a turn that does not end well ends on its streams: what it began is ended before its
 * `error` (native and Vercel alike), what its finished model calls used is reported and stored,
 * and each wire says only what it is.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

const agent = template({ tools: [builtin('write')], mode: 'allow' });
const native = (session = sid('end')) => invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: session });
const vercel = () => invokeBody([{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'go' }] }], agent);
const SSE = { accept: 'text/event-stream' };
const VERCEL_SSE = { ...SSE, 'x-ag-messages-format': 'vercel' };

interface Chunk {
  type: string;
  data?: any;
  id?: string;
  messageMetadata?: any;
}

/** The JSON payloads of an SSE body, native frames or Vercel chunks, without the Vercel `[DONE]`. */
function payloads(raw: string): Chunk[] {
  return raw
    .split('\n\n')
    .flatMap((block) => block.split('\n').filter((line) => line.startsWith('data: ')))
    .map((line) => line.slice(6))
    .filter((data) => data !== '[DONE]')
    .map((data) => JSON.parse(data) as Chunk);
}

const types = (chunks: Chunk[]) => chunks.map((c) => c.type);

/** Every message and thought the native stream began is ended exactly once, and before the error. */
function expectEnded(frames: Chunk[]): void {
  const errorAt = frames.findIndex((f) => f.type === 'error');
  const ids = (type: string, within = frames) => within.filter((f) => f.type === type).map((f) => f.data.id as string);
  expect(ids('message_end')).toEqual(ids('message_start'));
  expect(ids('thought_end')).toEqual(ids('thought_start'));
  expect(ids('message_end', frames.slice(errorAt))).toEqual([]);
  expect(ids('thought_end', frames.slice(errorAt))).toEqual([]);
}

/** Reads a stream to its end, calling `then` (and waiting for it) once `marker` has arrived. */
async function readAround(res: Response, marker: string, then: () => Promise<unknown>): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let raw = '';
  let fired = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return raw + decoder.decode();
    raw += decoder.decode(value, { stream: true });
    if (!fired && raw.includes(marker)) {
      fired = true;
      await then();
    }
  }
}

describe('a turn cut short mid-part', () => {
  // Every frame of the model's reply 400 ms apart: the text is open from ~0.4 s to ~3.2 s into the
  // reply, the reasoning from ~0.8 s to ~2.8 s; the turn's time runs out at 1.8 s, inside both.
  let slow: Harness;
  beforeAll(async () => {
    slow = await startHarness({ env: { AGENTD_TURN_TIMEOUT_MS: '1800' } });
  });
  afterAll(async () => slow.close());

  const cases = [
    { part: 'message', reply: { text: 'an answer the turn has no time to finish', chunkDelayMs: 400 }, end: 'message_end', vercelEnd: 'text-end' },
    { part: 'thought', reply: { reasoning: 'a thought the turn has no time to finish', chunkDelayMs: 400 }, end: 'thought_end', vercelEnd: 'reasoning-end' },
  ];

  it.each(cases)('a failure ends the open $part before the error frame', async ({ reply, end }) => {
    slow.model.script(reply);
    const res = await slow.invoke(native(), { headers: SSE });
    expect(res.status).toBe(200);
    const frames = payloads(await res.text());
    expect(types(frames).slice(-3)).toEqual([end, 'error', 'done']);
    expect(frames.at(-2)!.data).toMatchObject({ type: 'turn-timeout' });
    expectEnded(frames);
  });

  it.each(cases)('the Vercel stream of the same failure ends the open $part once, before its error', async ({ reply, vercelEnd }) => {
    slow.model.script(reply);
    const res = await slow.invoke(vercel(), { headers: VERCEL_SSE });
    const chunks = payloads(await res.text());
    expect(types(chunks).slice(-4)).toEqual([vercelEnd, 'error', 'finish-step', 'finish']);
    expect(types(chunks).filter((t) => t === vercelEnd)).toHaveLength(1);
  });

  it('a turn taken over (force) ends its open message before the error frame', async () => {
    const session = sid('taken');
    h.model.script([{ text: 'an answer a newer turn cuts short', chunkDelayMs: 200 }, { text: 'the new turn' }]);
    const old = await h.invoke(native(session), { headers: SSE });
    const raw = await readAround(old, '"message_delta"', async () => {
      const res = await h.invoke(native(session), { headers: { 'x-ag-session-control': 'force' } });
      expect((await readJson(res)).data.outputs.messages.at(-1).content).toBe('the new turn');
    });
    const frames = payloads(raw);
    expect(types(frames).slice(-3)).toEqual(['message_end', 'error', 'done']);
    expect(frames.at(-2)!.data).toMatchObject({ type: 'turn-cancelled' });
    expect(frames.at(-1)!.data).toMatchObject({ stop_reason: 'cancelled' });
    expectEnded(frames);
  });
});

describe('usage of a turn that fails after a model call finished', () => {
  const USED = { input: 10, output: 5, total: 15 };
  const writeStep = { toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }], usage: { input: 10, output: 5 } };

  it('is a usage frame before the error, and is stored with the failed turn', async () => {
    h.model.script([writeStep, { error: { status: 500 } }]);
    const res = await h.invoke(native(), { headers: SSE });
    const frames = payloads(await res.text());
    expect(types(frames).slice(-4)).toEqual(['tool_result', 'usage', 'error', 'done']);
    expect(frames.at(-3)!.data).toEqual(USED);
    const turn = await h.store.turns.get(h.projectId, frames[0]!.data.turn_id);
    expect(turn).toMatchObject({ status: 'failed', stop_reason: 'error', usage: USED });
  });

  it('is in the Vercel finish metadata', async () => {
    h.model.script([writeStep, { error: { status: 500 } }]);
    const chunks = payloads(await (await h.invoke(vercel(), { headers: VERCEL_SSE })).text());
    expect(chunks.at(-1)).toEqual({ type: 'finish', finishReason: 'error', messageMetadata: { stop_reason: 'error', usage: USED } });
  });

  it('is reported and stored for a turn stopped while its next call runs', async () => {
    const session = sid('stopped');
    h.model.script([writeStep, { hang: true }]);
    const res = await h.invoke(native(session), { headers: SSE });
    const raw = await readAround(res, '"tool_result"', async () => {
      while (h.model.requests.length < 2) await new Promise((resolve) => setTimeout(resolve, 20));
      const stop = await fetch(`${h.url}/api/sessions/${session}/stop?project_id=${h.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${h.apiKey}` } });
      expect(stop.status).toBe(200);
    });
    const frames = payloads(raw);
    expect(types(frames).slice(-3)).toEqual(['usage', 'error', 'done']);
    expect(frames.at(-3)!.data).toEqual(USED);
    const turn = await h.store.turns.get(h.projectId, frames[0]!.data.turn_id);
    expect(turn).toMatchObject({ status: 'cancelled', stop_reason: 'cancelled', usage: USED });
  });

  it('is not made up for a turn whose first call fails', async () => {
    h.model.script([{ text: 'never', chunkDelayMs: 200 }]);
    const session = sid('first');
    const res = await h.invoke(native(session), { headers: SSE });
    const raw = await readAround(res, '"message_delta"', () =>
      fetch(`${h.url}/api/sessions/${session}/stop?project_id=${h.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${h.apiKey}` } }),
    );
    const frames = payloads(raw);
    expect(types(frames)).not.toContain('usage');
    expect(types(frames).slice(-3)).toEqual(['message_end', 'error', 'done']);
    expect((await h.store.turns.get(h.projectId, frames[0]!.data.turn_id))?.usage).toBeNull();
  });
});

describe('the Vercel chunks over each wire', () => {
  it.each([
    ['text/event-stream', 'text/event-stream; charset=utf-8', 'v1'],
    ['application/x-ndjson', 'application/x-ndjson; charset=utf-8', null],
    ['application/jsonl', 'application/jsonl; charset=utf-8', null],
  ])('Accept: %s → %s, x-vercel-ai-ui-message-stream: %s', async (accept, contentType, uiStream) => {
    h.model.script({ text: 'hi from vercel' });
    const res = await h.invoke(vercel(), { headers: { accept, 'x-ag-messages-format': 'vercel' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(contentType);
    // The AI SDK reads a body that says it is the UI message stream as SSE; NDJSON is not that.
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe(uiStream);
    expect(res.headers.get('x-ag-messages-format')).toBe('vercel');
    expect(res.headers.get('x-ag-messages-version')).toBe('v1');
    const raw = await res.text();
    const chunks = accept === 'text/event-stream' ? payloads(raw) : raw.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Chunk);
    expect(chunks[0]!.type).toBe('start');
    expect(chunks.at(-1)!.type).toBe('finish');
    expect(raw.includes('[DONE]')).toBe(accept === 'text/event-stream');
  });
});
